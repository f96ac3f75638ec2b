//! The live handler's gate on the server's thread (`kvlog.integrate.handler`): a record that no probe
//! character can make a candidate costs two attribute reads and one byte scan here, not two Python
//! frames and ten character searches. The Python `EventHandler.handle` is the reference and takes
//! every record this side does not decide (arguments to format, a message that is no exact `str`, one
//! that is no UTF-8: a lone surrogate); `tests/test_native_probe.py` holds the verdicts to
//! `might_be_read` on every corpus line and fuzzed strings.

use memchr::{memchr, memchr2, memchr3, memmem};
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::gc::{PyTraverseError, PyVisit};
use pyo3::prelude::*;
use pyo3::PyTypeInfo;
use pyo3::types::{PyString, PyTuple};

/// Whether a message holds one of the probe characters (or, with `usage`, the word `usage`).
/// Three bytes a pass (``memchr3``, vectorised): a few passes over a short message beat a table per byte.
fn probed(bytes: &[u8], usage: Option<&memmem::Finder<'static>>, message: &[u8]) -> bool {
    // UTF-8 of a character beyond ASCII holds no ASCII byte: the verdict on bytes is the one on characters
    bytes.chunks(3).any(|three| match *three {
        [a, b, c] => memchr3(a, b, c, message).is_some(),
        [a, b] => memchr2(a, b, message).is_some(),
        [a] => memchr(a, message).is_some(),
        _ => false,
    }) || usage.map_or(false, |word| word.find(message).is_some())
}

/// `might_be_read` over the table of characters `kvlog.migration.candidates` hands over.
#[pyclass(module = "kvlog._native")]
pub struct Gate {
    bytes: Vec<u8>,
    usage: Option<memmem::Finder<'static>>,
    /// `handler._candidate(record, message)`: a record that may be read (filters, budget, queue)
    candidate: Option<PyObject>,
    /// the reference `handle(record)`, for every record not decided here
    reference: Option<PyObject>,
}

#[pymethods]
impl Gate {
    #[new]
    fn new(characters: &str, usage: bool, candidate: PyObject, reference: PyObject) -> PyResult<Self> {
        if !characters.is_ascii() {
            return Err(PyValueError::new_err("probe characters must be ASCII"));
        }
        let bytes = characters.as_bytes().to_vec();
        let usage = usage.then(|| memmem::Finder::new(b"usage").into_owned());
        Ok(Gate { bytes, usage, candidate: Some(candidate), reference: Some(reference) })
    }

    /// `might_be_read(message, usage=...)`; None for a message that is no UTF-8 (a lone surrogate).
    fn probe(&self, message: &PyString) -> Option<bool> {
        message.to_str().ok().map(|text| probed(&self.bytes, self.usage.as_ref(), text.as_bytes()))
    }

    /// `EventHandler.handle`: True, never an exception (but what is no `Exception`, as the reference).
    fn handle(&self, py: Python<'_>, record: &PyAny) -> PyResult<bool> {
        match self.decide(py, record) {
            Ok(()) => Ok(true),
            Err(err) if err.is_instance_of::<PyException>(py) => Ok(true),
            Err(err) => Err(err),
        }
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        for callback in [&self.candidate, &self.reference].into_iter().flatten() {
            visit.call(callback)?;
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        self.candidate = None;
        self.reference = None;
    }
}

impl Gate {
    fn decide(&self, py: Python<'_>, record: &PyAny) -> PyResult<()> {
        let (candidate, reference) = match (&self.candidate, &self.reference) {
            (Some(candidate), Some(reference)) => (candidate, reference),
            _ => return Ok(()),
        };
        let args = record.getattr(pyo3::intern!(py, "args"))?;
        let plain = args.is_none()
            || (PyTuple::is_exact_type_of(args) && args.downcast::<PyTuple>().map_or(false, |args| args.is_empty()));
        let message = record.getattr(pyo3::intern!(py, "msg"))?;
        let text = match message.downcast::<PyString>() {
            Ok(text) if plain && PyString::is_exact_type_of(message) => text,
            _ => {
                reference.call1(py, (record,))?;
                return Ok(());
            }
        };
        match self.probe(text) {
            Some(false) => Ok(()),
            Some(true) => candidate.call1(py, (record, text)).map(|_| ()),
            None => reference.call1(py, (record,)).map(|_| ()),
        }
    }
}
