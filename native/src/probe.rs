//! The live handler's gate on the server's thread (`kvlog.integrate.handler`): a record that no probe
//! character can make a candidate costs two attribute reads and one byte scan here, not two Python
//! frames and ten character searches. `handle` is a builtin of one argument (`METH_O`) whose body runs on
//! CPython's C API alone: PyO3 0.17's abi3 methods take an argument tuple, parse it, and open a `GILPool`
//! whose every `&PyAny` is freed through a `Vec` split off per call (malloc and free on every record of
//! the server: a third of the handler's cost on a request line, `BENCHMARKS.md`, issue 34). Nothing here
//! makes a PyO3-owned object, so no pool is needed. The Python `EventHandler.handle` is the reference and takes
//! every record this side does not decide (arguments to format, a message that is no exact `str`, one
//! that is no UTF-8: a lone surrogate); `tests/test_native_probe.py` holds the verdicts to
//! `might_be_read` on every corpus line and fuzzed strings.

use std::ffi::c_char;
use std::ptr;

use memchr::{memchr, memchr2, memchr3, memmem};
use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::gc::{PyTraverseError, PyVisit};
use pyo3::panic::PanicException;
use pyo3::prelude::*;
use pyo3::types::PyString;
use pyo3::AsPyPointer;

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
    /// the record's attributes read, interned once
    args: Py<PyString>,
    msg: Py<PyString>,
}

#[pymethods]
impl Gate {
    #[new]
    fn new(py: Python<'_>, characters: &str, usage: bool, candidate: PyObject, reference: PyObject) -> PyResult<Self> {
        if !characters.is_ascii() {
            return Err(PyValueError::new_err("probe characters must be ASCII"));
        }
        let bytes = characters.as_bytes().to_vec();
        let usage = usage.then(|| memmem::Finder::new(b"usage").into_owned());
        let (args, msg) = (PyString::intern(py, "args").into(), PyString::intern(py, "msg").into());
        Ok(Gate { bytes, usage, candidate: Some(candidate), reference: Some(reference), args, msg })
    }

    /// `might_be_read(message, usage=...)`; None for a message that is no UTF-8 (a lone surrogate).
    fn probe(&self, message: &PyString) -> Option<bool> {
        message.to_str().ok().map(|text| self.probed(text.as_bytes()))
    }

    /// `EventHandler.handle(record)` bound to this gate: True, never an exception (but what is no
    /// `Exception`, as the reference). A builtin of one argument (`METH_O`, `handle_record`).
    #[getter]
    fn handle(slf: &PyCell<Self>) -> PyResult<PyObject> {
        // SAFETY: HANDLE is never written; CPython only reads a method's definition
        unsafe {
            let function = ffi::PyCFunction_NewEx(ptr::addr_of_mut!(HANDLE), slf.as_ptr(), ptr::null_mut());
            PyObject::from_owned_ptr_or_err(slf.py(), function)
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

/// `Gate.handle`'s definition: one argument, no tuple, no keywords.
static mut HANDLE: ffi::PyMethodDef = ffi::PyMethodDef {
    ml_name: b"handle\0".as_ptr() as *const c_char,
    ml_meth: ffi::PyMethodDefPointer { PyCFunction: handle_record },
    ml_flags: ffi::METH_O,
    ml_doc: b"True, never an Exception: a candidate to candidate, every record not decided to reference.\0".as_ptr()
        as *const c_char,
};

/// The body of `Gate.handle`: `gate` is the `Gate` (the builtin's self), `record` borrowed from the caller.
unsafe extern "C" fn handle_record(gate: *mut ffi::PyObject, record: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: CPython calls a builtin with the GIL held, and its self is the Gate it was made for
    let py = Python::assume_gil_acquired();
    let decided = std::panic::catch_unwind(|| {
        let cell: &PyCell<Gate> = py.from_borrowed_ptr(gate);
        cell.try_borrow().map_or(true, |gate| gate.decide(record))
    });
    match decided {
        Ok(true) => {}
        // what the reference lets by: an `Exception` is the server's own handler's concern
        Ok(false) if ffi::PyErr_ExceptionMatches(ffi::PyExc_Exception) != 0 => ffi::PyErr_Clear(),
        Ok(false) => return ptr::null_mut(),
        Err(_) => {
            PanicException::new_err("kvlog._native.Gate.handle panicked").restore(py);
            return ptr::null_mut();
        }
    }
    let true_ = ffi::Py_True();
    ffi::Py_INCREF(true_);
    true_
}

impl Gate {
    fn probed(&self, message: &[u8]) -> bool {
        probed(&self.bytes, self.usage.as_ref(), message)
    }

    /// What `handle` does with `record`: false with Python's error indicator set where a call failed.
    /// Raw C API: every reference is owned or borrowed here, by hand, and none outlives the call.
    unsafe fn decide(&self, record: *mut ffi::PyObject) -> bool {
        let (candidate, reference) = match (&self.candidate, &self.reference) {
            (Some(candidate), Some(reference)) => (candidate.as_ptr(), reference.as_ptr()),
            _ => return true,
        };
        let args = ffi::PyObject_GetAttr(record, self.args.as_ptr());
        if args.is_null() {
            return false;
        }
        let plain = ffi::Py_IsNone(args) != 0 || (ffi::PyTuple_CheckExact(args) != 0 && ffi::PyTuple_Size(args) == 0);
        ffi::Py_DECREF(args);
        let message = ffi::PyObject_GetAttr(record, self.msg.as_ptr());
        if message.is_null() {
            return false;
        }
        let verdict = if plain && ffi::PyUnicode_CheckExact(message) != 0 {
            let mut size: ffi::Py_ssize_t = 0;
            let data = ffi::PyUnicode_AsUTF8AndSize(message, &mut size);
            if data.is_null() {
                ffi::PyErr_Clear(); // no UTF-8 (a lone surrogate): the reference decides
                None
            } else {
                Some(self.probed(std::slice::from_raw_parts(data as *const u8, size as usize)))
            }
        } else {
            None
        };
        let null = ptr::null_mut::<ffi::PyObject>();
        let called = match verdict {
            Some(false) => None,
            Some(true) => Some(ffi::PyObject_CallFunctionObjArgs(candidate, record, message, null)),
            None => Some(ffi::PyObject_CallFunctionObjArgs(reference, record, null)),
        };
        ffi::Py_DECREF(message);
        match called {
            Some(result) if result.is_null() => false,
            Some(result) => {
                ffi::Py_DECREF(result);
                true
            }
            None => true,
        }
    }
}
