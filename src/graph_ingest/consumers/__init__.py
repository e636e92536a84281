"""The consumer runtime every worker shares, and the workers built on it as subpackages.

The runtime: ``plan_message`` (a consumed plan, decoded), ``decode_ahead`` (decoding beside the
apply), ``batching`` (which plans may share a batch), ``offsets`` (what may be committed),
``breakers`` (a loop's circuit breakers), ``runtime`` (the poll timeout, the paused wait, the
rebalance hooks) and ``hooks`` (the lifecycle events metrics and health subscribe to). The Kafka
client itself is ``kafka.consumer``. The workers: ``applier/`` and ``planner/``.
"""
