"""``kvlog follow``'s machinery: live logs through the migration engine, with marks for restarts.

``kvlog.io.tailing`` finds the whole lines; ``follower`` turns them into events and tells observers
(the gauges of ``kvlog.metrics``, an OpenTelemetry export); ``state`` keeps what a restart needs.
"""
