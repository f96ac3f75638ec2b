"""The schemas: the catalog of event versions, validation, codegen, and the one reading of JSON Schema.

Every part of kvlog that needs to know what a schema says (its fields, their types, whether a field may
be null or negative, how it is written in a log line) asks this package, so that there is exactly one
interpretation of JSON Schema. It belongs to the logging core: it imports neither torch nor the
migration, check or CLI layers.
"""
