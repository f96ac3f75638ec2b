"""The OpenTelemetry resource of an export: which service and process the telemetry comes from.

A backend groups and joins telemetry by the resource's semantic-convention attributes, so kvlog sets
the ones it knows: ``service.name``, ``service.instance.id`` (new for each export, as the conventions
suggest for a process that has no identity of its own), ``host.name`` and ``process.pid``. Each can be
overridden, in the order the SDK documents for its environment variables: kvlog's defaults, then
``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_SERVICE_NAME``, then what the caller passes.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Mapping
from typing import Final

from opentelemetry.sdk.resources import (
    HOST_NAME,
    PROCESS_PID,
    SERVICE_INSTANCE_ID,
    SERVICE_NAME,
    OTELResourceDetector,
    Resource,
)
from opentelemetry.util.types import AttributeValue

DEFAULT_SERVICE_NAME: Final = "kvlog"


def resource(service_name: str | None = None, attributes: Mapping[str, AttributeValue] | None = None) -> Resource:
    """The resource for an export: kvlog's defaults, the environment's, the caller's ``attributes``, ``service_name``.

    The SDK's own ``telemetry.sdk.*`` attributes are added too.
    """
    defaults: dict[str, AttributeValue] = {
        SERVICE_NAME: DEFAULT_SERVICE_NAME,
        SERVICE_INSTANCE_ID: str(uuid.uuid4()),
        HOST_NAME: socket.gethostname(),
        PROCESS_PID: os.getpid(),
    }
    given = dict(attributes or {})
    if service_name is not None:
        given[SERVICE_NAME] = service_name
    # Resource.create puts the environment's attributes under the ones it is given: passing them again
    # between kvlog's defaults and the caller's keeps the documented order
    detected = OTELResourceDetector().detect().attributes
    return Resource.create({**defaults, **detected, **given})
