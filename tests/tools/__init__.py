"""The tools' tests: the onceover command, the demo, the benches, the JVM archive, the
Spark cluster."""
