"""What an NVML sample costs against the probe the server's thread runs on every record.

``kvlog integrate --nvml`` samples on the handler's worker, never on the server's thread, because a
sample (``nvmlDeviceGetComputeRunningProcesses`` and ``nvmlDeviceGetMemoryInfo`` of one device) costs
far more than the probe (``might_be_read``) that decides whether a record is read at all. This
measures both in the same process: the probe on a memory line and on a request line, and
``NvmlSampler.sample`` (after NVML listed the process, so one device is asked). Needs a GPU, torch's
CUDA build and nvidia-ml-py (the device machine).

Usage: ``python benchmarks/bench_nvml_sample.py [--samples N]``; prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from kvlog.migration.candidates import might_be_read
from kvlog.nvml import open_sampler

MEMORY_LINE = "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1933312, K size: 36.88 GB, V size: 36.88 GB"
REQUEST_LINE = "Decode batch. #running-req: 12, #token: 40960, token usage: 0.02, gen throughput (token/s): 812.51"


def per_call_us(call: Callable[[], object], count: int) -> float:
    """The least of five rounds' mean cost of ``call``, in microseconds."""
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(count):
            call()
        best = min(best, (time.perf_counter() - start) / count)
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2000)
    args = parser.parse_args()
    import torch  # noqa: PLC0415 - the CUDA context, so that NVML lists this process

    torch.zeros(1, device="cuda")
    sampler, why = open_sampler()
    if sampler is None:
        raise SystemExit(f"no sampler: {why}")
    first = sampler.sample()
    sample_us = per_call_us(sampler.sample, args.samples)
    probe_memory_us = per_call_us(lambda: might_be_read(MEMORY_LINE), 100 * args.samples)
    probe_request_us = per_call_us(lambda: might_be_read(REQUEST_LINE), 100 * args.samples)
    sampler.close()
    print(
        json.dumps(
            {
                "device": torch.cuda.get_device_name(0),
                "process_listed": first is not None and first.process_used_bytes is not None,
                "nvml_sample_us": round(sample_us, 2),
                "probe_memory_line_us": round(probe_memory_us, 3),
                "probe_request_line_us": round(probe_request_us, 3),
                "sample_over_probe": round(sample_us / probe_memory_us, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
