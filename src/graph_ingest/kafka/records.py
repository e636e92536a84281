"""Where a Kafka record sits: the keys every consumer loop's bookkeeping uses."""

Partition = tuple[str, int]  # (topic, partition)
Position = tuple[str, int, int]  # (topic, partition, offset)
