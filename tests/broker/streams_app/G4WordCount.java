// A Kafka Streams word count (the shape of Kafka's own WordCountDemo) for the real-broker tests:
// a source subtopology that repartitions by word, a counting subtopology with a store (changelog).
// Run in source-file mode: java -cp <kafka-4 jars> G4WordCount.java <streams.properties>
import java.io.FileInputStream;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Produced;

public class G4WordCount {
    public static void main(final String[] args) throws Exception {
        final Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) {
            props.load(in);
        }
        props.putIfAbsent(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.putIfAbsent(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.putIfAbsent("auto.offset.reset", "earliest");
        final StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(props.getProperty("input.topic", "streams-plaintext-input"))
            .flatMapValues(v -> Arrays.asList(v.toLowerCase(Locale.ROOT).split("\\W+")))
            .groupBy((k, word) -> word)
            .count()
            .toStream()
            .to(props.getProperty("output.topic", "streams-wordcount-output"), Produced.with(Serdes.String(), Serdes.Long()));
        final KafkaStreams streams = new KafkaStreams(builder.build(), props);
        final CountDownLatch done = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close();
            done.countDown();
        }));
        streams.start();
        done.await();
    }
}
