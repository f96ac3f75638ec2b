//! The passthrough's line count: how many lines a run of lines no rule reads holds.
//!
//! A server log is mostly runs the engine copies through as read (`kvlog.migration.engine`,
//! `FileRun.passthrough`, one write of a memoryview of the block), and what such a run costs beyond
//! its read and its write is counting its lines, which every line number after it needs. CPython's
//! `bytes.count` looks at one byte at a time (2 GB/s here); this compares sixteen at once (~30 GB/s
//! on a block in cache). `tests/test_native_passthrough.py` holds it to `bytes.count`, and whole
//! migrations to the Python engine's.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// The newlines of `data`, sixteen bytes at a time: SSE2 is part of every x86-64 CPU.
#[cfg(target_arch = "x86_64")]
pub use sse2::newlines;

/// The newlines of `data`, by memchr's search where the CPU is not x86-64.
#[cfg(not(target_arch = "x86_64"))]
pub fn newlines(data: &[u8]) -> usize {
    memchr::memchr_iter(b'\n', data).count()
}

#[cfg(target_arch = "x86_64")]
mod sse2 {
    use std::arch::x86_64::{
        __m128i, _mm_add_epi64, _mm_cmpeq_epi8, _mm_cvtsi128_si64, _mm_loadu_si128, _mm_sad_epu8, _mm_set1_epi8,
        _mm_setzero_si128, _mm_srli_si128, _mm_sub_epi8,
    };

    /// Vectors compared into one set of byte-wide counters before they are added up: a counter holds 255.
    const ROUNDS: usize = 255;
    const LANE: usize = 16;

    pub fn newlines(data: &[u8]) -> usize {
        let mut chunks = data.chunks_exact(LANE * ROUNDS);
        // SAFETY: SSE2 is part of every x86-64 CPU; every load reads 16 bytes inside a chunk of `data`
        let mut total = unsafe {
            let newline = _mm_set1_epi8(b'\n' as i8);
            let mut sums = _mm_setzero_si128();
            for chunk in &mut chunks {
                let mut counts = _mm_setzero_si128();
                for lane in chunk.chunks_exact(LANE) {
                    let bytes = _mm_loadu_si128(lane.as_ptr().cast::<__m128i>());
                    // a newline compares as 0xff, -1: subtracting it counts one
                    counts = _mm_sub_epi8(counts, _mm_cmpeq_epi8(bytes, newline));
                }
                sums = _mm_add_epi64(sums, _mm_sad_epu8(counts, _mm_setzero_si128()));
            }
            (_mm_cvtsi128_si64(sums) + _mm_cvtsi128_si64(_mm_srli_si128(sums, 8))) as usize
        };
        let rest = chunks.remainder();
        let mut lanes = rest.chunks_exact(LANE);
        // SAFETY: as above; fewer than 255 vectors, so no counter overflows
        unsafe {
            let newline = _mm_set1_epi8(b'\n' as i8);
            let mut counts = _mm_setzero_si128();
            for lane in &mut lanes {
                let bytes = _mm_loadu_si128(lane.as_ptr().cast::<__m128i>());
                counts = _mm_sub_epi8(counts, _mm_cmpeq_epi8(bytes, newline));
            }
            let sums = _mm_sad_epu8(counts, _mm_setzero_si128());
            total += (_mm_cvtsi128_si64(sums) + _mm_cvtsi128_si64(_mm_srli_si128(sums, 8))) as usize;
        }
        total + lanes.remainder().iter().filter(|byte| **byte == b'\n').count()
    }
}

/// `data[start:end].count(b"\n")`, without the GIL.
#[pyfunction]
pub fn count_lines(py: Python<'_>, data: &[u8], start: usize, end: usize) -> PyResult<usize> {
    if start > end || end > data.len() {
        return Err(PyValueError::new_err("start <= end <= len(data) is required"));
    }
    Ok(py.allow_threads(|| newlines(&data[start..end])))
}
