//! `kvlog validate`'s native fast path: which lines of a block are valid events, for certain.
//!
//! A line is *accepted* only where the Python path (`kvlog.file_validation`) would count it a valid
//! event with no finding: it must read as strict JSON the way orjson reads it and the standard library
//! reads it again (no duplicate key, no integer beyond 64 bits, no lone surrogate, no BOM, no NaN, no
//! trailing bytes, nesting well inside what orjson writes back), and it must be valid against its
//! event version's schema as the decoder table (`kvlog.schema.decoders`, handed over at construction)
//! states it. Every other line is *rejected* and goes to the Python validator, which alone words
//! findings; a rule this side is unsure of (a float where an integer is wanted, an escaped key, a
//! float compared with a constant) rejects too, so a doubt costs time, never a verdict.
//!
//! The parser is hand-written rather than serde_json: duplicate keys must be seen (serde's maps keep
//! the last), integers judged by their text (beyond 64 bits, `-0`), and nothing allocated per line
//! but a reused tape of tokens that the schema nodes are then checked against.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

/// Deeper than this a line is left to Python (orjson writes back 254 levels; events nest a few).
const MAX_DEPTH: usize = 64;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Null,
    True,
    False,
    Int,
    Float,
    Str,
    Array,
    Object,
}

/// One JSON value of a line, in document order; a container's members follow it up to `next`.
#[derive(Clone, Copy, Debug)]
struct Token {
    kind: Kind,
    /// a string holding a backslash escape (its text is not its value)
    escaped: bool,
    /// a string of ASCII bytes only
    ascii: bool,
    /// strings: the bytes between the quotes; numbers: the literal
    start: usize,
    end: usize,
    /// the index after this value and its members
    next: usize,
    /// integers: the value; object keys: the hash of the key
    int: i128,
}

/// Why a line is not accepted: not read as the Python path reads it, or a rule this side leaves to it.
struct Reject;

type Verdict = Result<bool, Reject>;

/// A hash of a key, eight bytes at a time (the last eight overlapping; a short key gathered in a
/// register, as a partial store read back whole would stall).
fn key_hash(key: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mix = |hash: u64, word: u64| (hash ^ word).wrapping_mul(K).rotate_left(31);
    let load = |at: usize| {
        let mut word = [0u8; 8];
        word.copy_from_slice(&key[at..at + 8]);
        u64::from_le_bytes(word)
    };
    let length = key.len();
    let mut hash = (length as u64).wrapping_mul(K);
    if length >= 8 {
        let mut at = 0;
        while at + 8 <= length {
            hash = mix(hash, load(at));
            at += 8;
        }
        if at < length {
            hash = mix(hash, load(length - 8));
        }
    } else {
        let mut word = 0u64;
        for (position, &byte) in key.iter().enumerate() {
            word |= u64::from(byte) << (8 * position);
        }
        hash = mix(hash, word);
    }
    hash ^ (hash >> 29)
}

/// Whether two short byte strings are equal, compared inline (a call to `memcmp` a key cost more).
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// `key_hash` as a `Hasher`, for the table of event names (SipHash costs more than the rest of a lookup).
#[derive(Default)]
struct NameHasher(u64);

impl std::hash::Hasher for NameHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0 ^= key_hash(bytes);
    }
}

/// A strict reader of one JSON text into a tape.
struct Parser<'a> {
    text: &'a [u8],
    at: usize,
    tape: &'a mut Vec<Token>,
    /// the keys of the objects being read (tape indices), a run per open object
    keys: &'a mut Vec<usize>,
}

impl<'a> Parser<'a> {
    fn read(text: &'a [u8], tape: &'a mut Vec<Token>, keys: &'a mut Vec<usize>) -> Result<(), Reject> {
        tape.clear();
        keys.clear();
        let mut parser = Parser { text, at: 0, tape, keys };
        parser.space();
        parser.value(0)?;
        parser.space();
        if parser.at == text.len() {
            Ok(())
        } else {
            Err(Reject)
        }
    }

    fn space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.text.get(self.at) {
            self.at += 1;
        }
    }

    /// After an item of an object or array: past its `,` (false: another item follows) or its `close` (true).
    fn closed_after_item(&mut self, close: u8) -> Result<bool, Reject> {
        self.space();
        match self.text.get(self.at) {
            Some(b',') => {
                self.at += 1;
                self.space();
                Ok(false)
            }
            Some(&byte) if byte == close => {
                self.at += 1;
                Ok(true)
            }
            _ => Err(Reject),
        }
    }

    fn push(&mut self, kind: Kind, start: usize, end: usize) -> usize {
        let index = self.tape.len();
        self.tape.push(Token { kind, escaped: false, ascii: true, start, end, next: index + 1, int: 0 });
        index
    }

    fn literal(&mut self, word: &[u8], kind: Kind) -> Result<(), Reject> {
        if self.text[self.at..].starts_with(word) {
            self.push(kind, self.at, self.at + word.len());
            self.at += word.len();
            Ok(())
        } else {
            Err(Reject)
        }
    }

    fn value(&mut self, depth: usize) -> Result<(), Reject> {
        match self.text.get(self.at) {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(|_| ()),
            Some(b't') => self.literal(b"true", Kind::True),
            Some(b'f') => self.literal(b"false", Kind::False),
            Some(b'n') => self.literal(b"null", Kind::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(Reject),
        }
    }

    fn object(&mut self, depth: usize) -> Result<(), Reject> {
        if depth >= MAX_DEPTH {
            return Err(Reject);
        }
        let index = self.push(Kind::Object, self.at, self.at);
        self.at += 1;
        self.space();
        let first_key = self.keys.len();
        if self.text.get(self.at) == Some(&b'}') {
            self.at += 1;
        } else {
            loop {
                if self.text.get(self.at) != Some(&b'"') {
                    return Err(Reject);
                }
                let key = self.string()?;
                if self.tape[key].escaped {
                    return Err(Reject); // an escaped key may equal another once read: left to Python
                }
                let token = self.tape[key];
                self.tape[key].int = key_hash(&self.text[token.start..token.end]) as i128;
                self.keys.push(key);
                self.space();
                if self.text.get(self.at) != Some(&b':') {
                    return Err(Reject);
                }
                self.at += 1;
                self.space();
                self.value(depth + 1)?;
                if self.closed_after_item(b'}')? {
                    break;
                }
            }
            self.unique_keys(first_key)?;
        }
        self.keys.truncate(first_key);
        self.tape[index].next = self.tape.len();
        self.tape[index].end = self.at;
        Ok(())
    }

    /// No two keys of the object whose keys start at `first` are equal (a 256-bit filter, then bytes).
    fn unique_keys(&self, first: usize) -> Result<(), Reject> {
        let keys = &self.keys[first..];
        let mut filter = [0u64; 4];
        for (position, &key) in keys.iter().enumerate() {
            let hash = self.tape[key].int as u64;
            let bit = (hash >> 56) as usize;
            let (word, mask) = (bit >> 6, 1u64 << (bit & 63));
            if filter[word] & mask != 0 {
                let text = self.key_text(key);
                if keys[..position].iter().any(|&other| self.tape[other].int == self.tape[key].int && self.key_text(other) == text) {
                    return Err(Reject);
                }
            }
            filter[word] |= mask;
        }
        Ok(())
    }

    fn key_text(&self, key: usize) -> &[u8] {
        &self.text[self.tape[key].start..self.tape[key].end]
    }

    fn array(&mut self, depth: usize) -> Result<(), Reject> {
        if depth >= MAX_DEPTH {
            return Err(Reject);
        }
        let index = self.push(Kind::Array, self.at, self.at);
        self.at += 1;
        self.space();
        if self.text.get(self.at) == Some(&b']') {
            self.at += 1;
        } else {
            loop {
                self.value(depth + 1)?;
                if self.closed_after_item(b']')? {
                    break;
                }
            }
        }
        self.tape[index].next = self.tape.len();
        self.tape[index].end = self.at;
        Ok(())
    }

    /// A string from its opening quote: no control character, valid UTF-8, escapes well formed and
    /// surrogates paired (orjson refuses a lone one).
    fn string(&mut self) -> Result<usize, Reject> {
        let start = self.at + 1;
        let mut at = start;
        let (mut escaped, mut ascii) = (false, true);
        let text = self.text;
        loop {
            at = plain_run(text, at);
            let byte = *text.get(at).ok_or(Reject)?;
            match byte {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    at += 1;
                    match text.get(at) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => at += 1,
                        Some(b'u') => {
                            let unit = hex4(text, at + 1)?;
                            at += 5;
                            if (0xD800..0xDC00).contains(&unit) {
                                if text.get(at) != Some(&b'\\') || text.get(at + 1) != Some(&b'u') {
                                    return Err(Reject);
                                }
                                let low = hex4(text, at + 2)?;
                                if !(0xDC00..0xE000).contains(&low) {
                                    return Err(Reject);
                                }
                                at += 6;
                            } else if (0xDC00..0xE000).contains(&unit) {
                                return Err(Reject);
                            }
                        }
                        _ => return Err(Reject),
                    }
                }
                0..=0x1F => return Err(Reject),
                0x80..=0xFF => {
                    ascii = false;
                    at += 1;
                }
                _ => at += 1,
            }
        }
        if !ascii && std::str::from_utf8(&text[start..at]).is_err() {
            return Err(Reject);
        }
        let index = self.push(Kind::Str, start, at);
        self.tape[index].escaped = escaped;
        self.tape[index].ascii = ascii;
        self.at = at + 1;
        Ok(index)
    }

    /// A number: an integer orjson and the standard library read exactly (64 bits), or a finite float.
    fn number(&mut self) -> Result<(), Reject> {
        let text = self.text;
        let start = self.at;
        let mut at = start;
        let negative = text[at] == b'-';
        if negative {
            at += 1;
        }
        let digits_start = at;
        match text.get(at) {
            Some(b'0') => at += 1,
            Some(b'1'..=b'9') => {
                while let Some(b'0'..=b'9') = text.get(at) {
                    at += 1;
                }
            }
            _ => return Err(Reject),
        }
        let digits_end = at;
        let mut float = false;
        if text.get(at) == Some(&b'.') {
            at += 1;
            float = true;
            if !matches!(text.get(at), Some(b'0'..=b'9')) {
                return Err(Reject);
            }
            while let Some(b'0'..=b'9') = text.get(at) {
                at += 1;
            }
        }
        let mut exponent = false;
        if let Some(b'e' | b'E') = text.get(at) {
            at += 1;
            float = true;
            exponent = true;
            if let Some(b'+' | b'-') = text.get(at) {
                at += 1;
            }
            if !matches!(text.get(at), Some(b'0'..=b'9')) {
                return Err(Reject);
            }
            while let Some(b'0'..=b'9') = text.get(at) {
                at += 1;
            }
        }
        self.at = at;
        if float {
            // only an exponent or some 300 digits can take a double out of range (orjson refuses infinity)
            if (exponent || digits_end - digits_start > 300) && !float_value(&text[start..at]).is_finite() {
                return Err(Reject);
            }
            self.push(Kind::Float, start, at);
            return Ok(());
        }
        let mut magnitude: u64 = 0;
        for &digit in &text[digits_start..digits_end] {
            // beyond 64 bits orjson reads the nearest float, and the Python path reports it
            magnitude = magnitude.checked_mul(10).and_then(|m| m.checked_add(u64::from(digit - b'0'))).ok_or(Reject)?;
        }
        let value = if negative { -i128::from(magnitude) } else { i128::from(magnitude) };
        if value < -(1i128 << 63) {
            return Err(Reject);
        }
        let index = self.push(Kind::Int, start, at);
        self.tape[index].int = value;
        Ok(())
    }
}

/// Where the run of plain string bytes from `at` ends: the first quote, backslash, control character
/// or non-ASCII byte (or the end), eight bytes at a time.
fn plain_run(text: &[u8], mut at: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    while at + 8 <= text.len() {
        let mut word = [0u8; 8];
        word.copy_from_slice(&text[at..at + 8]);
        let word = u64::from_le_bytes(word);
        let quote = word ^ (ONES * u64::from(b'"'));
        let backslash = word ^ (ONES * u64::from(b'\\'));
        let special = (quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash)
            | (word.wrapping_sub(ONES * 0x20) & !word)
            | word;
        let special = special & HIGH;
        if special != 0 {
            return at + (special.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    while let Some(&byte) = text.get(at) {
        if byte == b'"' || byte == b'\\' || byte < 0x20 || byte >= 0x80 {
            break;
        }
        at += 1;
    }
    at
}

fn hex4(text: &[u8], at: usize) -> Result<u32, Reject> {
    let digits = text.get(at..at + 4).ok_or(Reject)?;
    let mut unit = 0u32;
    for &digit in digits {
        unit = unit * 16 + (digit as char).to_digit(16).ok_or(Reject)?;
    }
    Ok(unit)
}

fn float_value(literal: &[u8]) -> f64 {
    std::str::from_utf8(literal).ok().and_then(|text| text.parse::<f64>().ok()).unwrap_or(f64::NAN)
}

/// A string's value: escapes read (the parser checked them), into `scratch`.
fn unescape(raw: &[u8], scratch: &mut String) {
    scratch.clear();
    let mut at = 0;
    while at < raw.len() {
        let byte = raw[at];
        if byte != b'\\' {
            let run = raw[at..].iter().position(|&b| b == b'\\').unwrap_or(raw.len() - at);
            scratch.push_str(std::str::from_utf8(&raw[at..at + run]).unwrap_or(""));
            at += run;
            continue;
        }
        let code = match raw[at + 1] {
            b'b' => 0x08,
            b'f' => 0x0C,
            b'n' => 0x0A,
            b'r' => 0x0D,
            b't' => 0x09,
            b'u' => {
                let unit = hex4(raw, at + 2).unwrap_or(0xFFFD);
                if (0xD800..0xDC00).contains(&unit) {
                    let low = hex4(raw, at + 8).unwrap_or(0xDC00);
                    at += 6;
                    0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                } else {
                    unit
                }
            }
            other => u32::from(other),
        };
        at += if raw[at + 1] == b'u' { 6 } else { 2 };
        scratch.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
    }
}

// The decoder table, as built from `kvlog.schema.decoders`' JSON.

const T_NULL: u8 = 1;
const T_BOOLEAN: u8 = 2;
const T_INTEGER: u8 = 4;
const T_NUMBER: u8 = 8;
const T_STRING: u8 = 16;
const T_ARRAY: u8 = 32;
const T_OBJECT: u8 = 64;
const T_ANY: u8 = 127;

#[derive(Clone, Debug, PartialEq)]
enum Scalar {
    Null,
    Bool(bool),
    Int(i128),
    Str(String),
}

/// The keys an object node names: a property's node, a required bit, or both; found by hash.
#[derive(Default)]
struct Keys {
    entries: Vec<(Vec<u8>, Option<usize>, u64)>,
    /// open addressing: each slot the hash of its key and the key's entry (`u32::MAX`: empty)
    slots: Vec<(u64, u32)>,
}

impl Keys {
    fn new(entries: Vec<(Vec<u8>, Option<usize>, u64)>) -> Keys {
        let size = (entries.len() * 2).next_power_of_two().max(8);
        let mut slots = vec![(0, u32::MAX); size];
        for (index, (key, _, _)) in entries.iter().enumerate() {
            let hash = key_hash(key);
            let mut slot = hash as usize & (size - 1);
            while slots[slot].1 != u32::MAX {
                slot = (slot + 1) & (size - 1);
            }
            slots[slot] = (hash, index as u32);
        }
        Keys { entries, slots }
    }

    fn find(&self, hash: u64, key: &[u8]) -> Option<&(Vec<u8>, Option<usize>, u64)> {
        if self.entries.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut slot = hash as usize & mask;
        loop {
            let (slot_hash, index) = self.slots[slot];
            if index == u32::MAX {
                return None;
            }
            if slot_hash == hash {
                let entry = &self.entries[index as usize];
                if same_bytes(&entry.0, key) {
                    return Some(entry);
                }
            }
            slot = (slot + 1) & mask;
        }
    }
}

/// Which of a node's keyword groups it holds, so that a check skips the others at once.
const HAS_VALUES: u8 = 1;
const HAS_NUMBER: u8 = 2;
const HAS_STRING: u8 = 4;
const HAS_OBJECT: u8 = 8;
const HAS_ARRAY: u8 = 16;
const HAS_LOGIC: u8 = 32;

#[derive(Default)]
struct Node {
    never: bool,
    groups: u8,
    types: u8,
    constant: Option<Scalar>,
    choices: Option<Vec<Scalar>>,
    minimum: Option<i128>,
    maximum: Option<i128>,
    exclusive_minimum: Option<i128>,
    exclusive_maximum: Option<i128>,
    min_length: Option<usize>,
    max_length: Option<usize>,
    pattern: Option<usize>,
    keys: Keys,
    required: u64,
    additional: Option<usize>,
    names: Option<usize>,
    items: Option<usize>,
    min_items: Option<usize>,
    max_items: Option<usize>,
    all_of: Vec<usize>,
    any_of: Vec<usize>,
    one_of: Vec<usize>,
    not: Option<usize>,
    condition: Option<usize>,
    then: Option<usize>,
    otherwise: Option<usize>,
}

struct Pattern {
    anchored: bool,
    /// per state: accepting, and its moves (low, high, next) in order
    states: Vec<(bool, Vec<(u32, u32, usize)>)>,
    /// the same moves on ASCII characters, 128 a state (`NO_MOVE`: none)
    ascii: Vec<u16>,
}

const NO_MOVE: u16 = u16::MAX;

impl Pattern {
    fn new(anchored: bool, states: Vec<(bool, Vec<(u32, u32, usize)>)>) -> Pattern {
        let mut ascii = vec![NO_MOVE; states.len() * 128];
        for (state, (_, moves)) in states.iter().enumerate() {
            for code in 0..128u32 {
                if let Some(&(_, _, next)) = moves.iter().find(|&&(low, high, _)| low <= code && code <= high) {
                    ascii[state * 128 + code as usize] = next as u16;
                }
            }
        }
        Pattern { anchored, states, ascii }
    }

    fn step(&self, state: usize, code: u32) -> Option<usize> {
        if code < 128 {
            let next = self.ascii[state * 128 + code as usize];
            return if next == NO_MOVE { None } else { Some(usize::from(next)) };
        }
        let moves = &self.states[state].1;
        moves.iter().find(|&&(low, high, _)| low <= code && code <= high).map(|&(_, _, next)| next)
    }

    fn matches(&self, text: &str) -> bool {
        self.matches_codes(text.chars().map(|char| char as u32))
    }

    fn matches_codes(&self, codes: impl Iterator<Item = u32>) -> bool {
        let mut state = 0;
        if !self.anchored && self.states[0].0 {
            return true;
        }
        for code in codes {
            match self.step(state, code) {
                Some(next) => state = next,
                None => return false,
            }
            if !self.anchored && self.states[state].0 {
                return true;
            }
        }
        self.states[state].0
    }
}

/// The table's JSON, read into values (only at construction).
#[derive(Clone, Debug)]
enum Value {
    Null,
    Bool(bool),
    Int(i128),
    Float,
    Str(String),
    Array(Vec<Value>),
    Object(Vec<(String, Value)>),
}

fn value_at(text: &[u8], tape: &[Token], index: usize, scratch: &mut String) -> Value {
    let token = tape[index];
    match token.kind {
        Kind::Null => Value::Null,
        Kind::True => Value::Bool(true),
        Kind::False => Value::Bool(false),
        Kind::Int => Value::Int(token.int),
        Kind::Float => Value::Float,
        Kind::Str => {
            unescape(&text[token.start..token.end], scratch);
            Value::Str(scratch.clone())
        }
        Kind::Array => {
            let mut items = Vec::new();
            let mut at = index + 1;
            while at < token.next {
                items.push(value_at(text, tape, at, scratch));
                at = tape[at].next;
            }
            Value::Array(items)
        }
        Kind::Object => {
            let mut members = Vec::new();
            let mut at = index + 1;
            while at < token.next {
                let key = String::from_utf8_lossy(&text[tape[at].start..tape[at].end]).into_owned();
                members.push((key, value_at(text, tape, at + 1, scratch)));
                at = tape[at + 1].next;
            }
            Value::Object(members)
        }
    }
}

fn bad(what: &str) -> PyErr {
    PyValueError::new_err(format!("the decoder table is not what kvlog.schema.decoders writes: {what}"))
}

fn member<'v>(members: &'v [(String, Value)], name: &str) -> Option<&'v Value> {
    members.iter().find(|(key, _)| key == name).map(|(_, value)| value)
}

fn as_list<'v>(value: &'v Value, what: &str) -> PyResult<&'v [Value]> {
    match value {
        Value::Array(items) => Ok(items),
        _ => Err(bad(what)),
    }
}

fn as_int(value: &Value, what: &str) -> PyResult<i128> {
    match value {
        Value::Int(number) => Ok(*number),
        _ => Err(bad(what)),
    }
}

fn as_index(value: &Value, what: &str, count: usize) -> PyResult<usize> {
    let number = as_int(value, what)?;
    if number < 0 || number as usize >= count {
        return Err(bad(what));
    }
    Ok(number as usize)
}

fn as_scalar(value: &Value) -> PyResult<Scalar> {
    match value {
        Value::Null => Ok(Scalar::Null),
        Value::Bool(flag) => Ok(Scalar::Bool(*flag)),
        Value::Int(number) => Ok(Scalar::Int(*number)),
        Value::Str(text) => Ok(Scalar::Str(text.clone())),
        _ => Err(bad("a const or enum value that is no scalar")),
    }
}

fn build_node(value: &Value, count: usize, patterns: usize) -> PyResult<Node> {
    let members = match value {
        Value::Object(members) => members,
        _ => return Err(bad("a node that is no object")),
    };
    let mut node = Node { types: T_ANY, ..Node::default() };
    let index = |value: &Value, what: &str| as_index(value, what, count);
    let indices = |value: &Value, what: &str| -> PyResult<Vec<usize>> {
        as_list(value, what)?.iter().map(|item| as_index(item, what, count)).collect()
    };
    let count_of = |value: &Value, what: &str| -> PyResult<usize> {
        let number = as_int(value, what)?;
        usize::try_from(number).map_err(|_| bad(what))
    };
    for (key, value) in members {
        match key.as_str() {
            "never" => node.never = true,
            "types" => {
                node.types = 0;
                for name in as_list(value, "types")? {
                    node.types |= match name {
                        Value::Str(name) if name == "null" => T_NULL,
                        Value::Str(name) if name == "boolean" => T_BOOLEAN,
                        Value::Str(name) if name == "integer" => T_INTEGER,
                        Value::Str(name) if name == "number" => T_NUMBER,
                        Value::Str(name) if name == "string" => T_STRING,
                        Value::Str(name) if name == "array" => T_ARRAY,
                        Value::Str(name) if name == "object" => T_OBJECT,
                        _ => return Err(bad("an unknown type")),
                    };
                }
            }
            "const" => node.constant = Some(as_scalar(value)?),
            "enum" => node.choices = Some(as_list(value, "enum")?.iter().map(as_scalar).collect::<PyResult<_>>()?),
            "minimum" => node.minimum = Some(as_int(value, key)?),
            "maximum" => node.maximum = Some(as_int(value, key)?),
            "exclusiveMinimum" => node.exclusive_minimum = Some(as_int(value, key)?),
            "exclusiveMaximum" => node.exclusive_maximum = Some(as_int(value, key)?),
            "minLength" => node.min_length = Some(count_of(value, key)?),
            "maxLength" => node.max_length = Some(count_of(value, key)?),
            "minItems" => node.min_items = Some(count_of(value, key)?),
            "maxItems" => node.max_items = Some(count_of(value, key)?),
            "pattern" => node.pattern = Some(as_index(value, key, patterns)?),
            "additional" => node.additional = Some(index(value, key)?),
            "names" => node.names = Some(index(value, key)?),
            "items" => node.items = Some(index(value, key)?),
            "not" => node.not = Some(index(value, key)?),
            "if" => node.condition = Some(index(value, key)?),
            "then" => node.then = Some(index(value, key)?),
            "else" => node.otherwise = Some(index(value, key)?),
            "allOf" => node.all_of = indices(value, key)?,
            "anyOf" => node.any_of = indices(value, key)?,
            "oneOf" => node.one_of = indices(value, key)?,
            "keys" => {
                let mut entries = Vec::new();
                let mut bit = 0;
                for entry in as_list(value, key)? {
                    match as_list(entry, key)? {
                        [Value::Str(name), property, Value::Bool(required)] => {
                            let property = match property {
                                Value::Null => None,
                                other => Some(index(other, key)?),
                            };
                            let mask = if *required {
                                if bit == 64 {
                                    return Err(bad("more than 64 required keys"));
                                }
                                bit += 1;
                                1u64 << (bit - 1)
                            } else {
                                0
                            };
                            node.required |= mask;
                            entries.push((name.as_bytes().to_vec(), property, mask));
                        }
                        _ => return Err(bad("a key entry")),
                    }
                }
                node.keys = Keys::new(entries);
            }
            _ => return Err(bad(&format!("an unknown node keyword {key:?}"))),
        }
    }
    let groups = [
        (node.constant.is_some() || node.choices.is_some(), HAS_VALUES),
        (node.minimum.or(node.maximum).or(node.exclusive_minimum).or(node.exclusive_maximum).is_some(), HAS_NUMBER),
        (node.min_length.is_some() || node.max_length.is_some() || node.pattern.is_some(), HAS_STRING),
        (!node.keys.entries.is_empty() || node.additional.is_some() || node.names.is_some(), HAS_OBJECT),
        (node.items.is_some() || node.min_items.is_some() || node.max_items.is_some(), HAS_ARRAY),
        (
            !(node.all_of.is_empty() && node.any_of.is_empty() && node.one_of.is_empty())
                || node.not.is_some()
                || node.condition.is_some(),
            HAS_LOGIC,
        ),
    ];
    node.groups = groups.iter().filter(|(held, _)| *held).fold(0, |groups, (_, bit)| groups | bit);
    Ok(node)
}

fn build_pattern(value: &Value) -> PyResult<Pattern> {
    let members = match value {
        Value::Object(members) => members,
        _ => return Err(bad("a pattern that is no object")),
    };
    let anchored = matches!(member(members, "anchored"), Some(Value::Bool(true)));
    let listed = as_list(member(members, "states").ok_or_else(|| bad("a pattern without states"))?, "states")?;
    let mut states = Vec::new();
    for state in listed {
        match as_list(state, "a state")? {
            [Value::Bool(accepting), moves] => {
                let mut built = Vec::new();
                for step in as_list(moves, "moves")? {
                    match as_list(step, "a move")? {
                        [low, high, next] => built.push((
                            as_int(low, "a move")? as u32,
                            as_int(high, "a move")? as u32,
                            as_index(next, "a move", listed.len())?,
                        )),
                        _ => return Err(bad("a move")),
                    }
                }
                states.push((*accepting, built));
            }
            _ => return Err(bad("a state")),
        }
    }
    if states.is_empty() || states.len() >= usize::from(NO_MOVE) {
        return Err(bad("a pattern without states, or with too many"));
    }
    Ok(Pattern::new(anchored, states))
}

/// The native validator of `kvlog validate`: the lines of a block it cannot vouch for.
#[pyclass(module = "kvlog._native")]
pub struct EventDecoders {
    nodes: Vec<Node>,
    patterns: Vec<Pattern>,
    /// each event name's versions and their root nodes
    events: HashMap<Vec<u8>, Vec<(i128, usize)>, BuildHasherDefault<NameHasher>>,
}

/// What one line's check needs besides the table: its text and tape, and room to read an escaped string.
struct Line<'a> {
    text: &'a [u8],
    tape: &'a [Token],
    scratch: String,
}

impl<'a> Line<'a> {
    /// The string at `index` as text: its bytes, or its escapes read into the scratch string.
    fn string(&mut self, index: usize) -> &str {
        let token = self.tape[index];
        let raw = &self.text[token.start..token.end];
        if token.escaped {
            unescape(raw, &mut self.scratch);
            &self.scratch
        } else {
            std::str::from_utf8(raw).unwrap_or("")
        }
    }

    fn float(&self, index: usize) -> f64 {
        let token = self.tape[index];
        float_value(&self.text[token.start..token.end])
    }
}

const EXACT_IN_DOUBLE: i128 = 1 << 53;

impl EventDecoders {
    fn check(&self, node: usize, line: &mut Line<'_>, at: usize) -> Verdict {
        let node = &self.nodes[node];
        if node.never {
            return Ok(false);
        }
        let token = line.tape[at];
        if node.types != T_ANY && !self.has_type(node.types, line, at)? {
            return Ok(false);
        }
        if node.groups == 0 {
            return Ok(true);
        }
        if node.groups & HAS_VALUES != 0 && !self.values(node, line, at)? {
            return Ok(false);
        }
        let held = match token.kind {
            Kind::Int | Kind::Float if node.groups & HAS_NUMBER != 0 => self.bounds(node, line, at)?,
            Kind::Str if node.groups & HAS_STRING != 0 => self.text(node, line, at),
            Kind::Object if node.groups & HAS_OBJECT != 0 => self.object(node, line, at)?,
            Kind::Array if node.groups & HAS_ARRAY != 0 => self.array(node, line, at)?,
            _ => true,
        };
        if !held {
            return Ok(false);
        }
        if node.groups & HAS_LOGIC != 0 {
            return self.logic(node, line, at);
        }
        Ok(true)
    }

    fn values(&self, node: &Node, line: &mut Line<'_>, at: usize) -> Verdict {
        if let Some(constant) = &node.constant {
            if !self.equals(constant, line, at)? {
                return Ok(false);
            }
        }
        if let Some(choices) = &node.choices {
            for choice in choices {
                if self.equals(choice, line, at)? {
                    return Ok(true);
                }
            }
            return Ok(false);
        }
        Ok(true)
    }

    fn text(&self, node: &Node, line: &mut Line<'_>, at: usize) -> bool {
        let token = line.tape[at];
        if (node.min_length.is_some() || node.max_length.is_some()) && !self.lengths(node, line, at) {
            return false;
        }
        match node.pattern {
            Some(pattern) => {
                let pattern = &self.patterns[pattern];
                if token.ascii && !token.escaped {
                    pattern.matches_codes(line.text[token.start..token.end].iter().map(|&byte| u32::from(byte)))
                } else {
                    pattern.matches(line.string(at))
                }
            }
            None => true,
        }
    }

    fn logic(&self, node: &Node, line: &mut Line<'_>, at: usize) -> Verdict {
        for &sub in &node.all_of {
            if !self.check(sub, line, at)? {
                return Ok(false);
            }
        }
        if !node.any_of.is_empty() {
            let mut any = false;
            for &sub in &node.any_of {
                if self.check(sub, line, at)? {
                    any = true;
                    break;
                }
            }
            if !any {
                return Ok(false);
            }
        }
        if !node.one_of.is_empty() {
            let mut matched = 0;
            for &sub in &node.one_of {
                matched += usize::from(self.check(sub, line, at)?);
            }
            if matched != 1 {
                return Ok(false);
            }
        }
        if let Some(sub) = node.not {
            if self.check(sub, line, at)? {
                return Ok(false);
            }
        }
        if let Some(condition) = node.condition {
            let branch = if self.check(condition, line, at)? { node.then } else { node.otherwise };
            if let Some(branch) = branch {
                if !self.check(branch, line, at)? {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    fn has_type(&self, types: u8, line: &Line<'_>, at: usize) -> Verdict {
        let bit = match line.tape[at].kind {
            Kind::Null => T_NULL,
            Kind::True | Kind::False => T_BOOLEAN,
            Kind::Int => return Ok(types & (T_INTEGER | T_NUMBER) != 0),
            Kind::Float => {
                if types & T_NUMBER != 0 {
                    return Ok(true);
                }
                if types & T_INTEGER != 0 && line.float(at).fract() == 0.0 {
                    return Err(Reject); // 1.0 is an integer to JSON Schema: Python decides
                }
                return Ok(false);
            }
            Kind::Str => T_STRING,
            Kind::Array => T_ARRAY,
            Kind::Object => T_OBJECT,
        };
        Ok(types & bit != 0)
    }

    fn equals(&self, expected: &Scalar, line: &mut Line<'_>, at: usize) -> Verdict {
        let token = line.tape[at];
        Ok(match (expected, token.kind) {
            (Scalar::Null, Kind::Null) => true,
            (Scalar::Bool(flag), Kind::True) => *flag,
            (Scalar::Bool(flag), Kind::False) => !*flag,
            (Scalar::Int(number), Kind::Int) => *number == token.int,
            (Scalar::Int(_), Kind::Float) => return Err(Reject), // 1.0 equals 1: Python decides
            (Scalar::Str(text), Kind::Str) if !token.escaped => same_bytes(text.as_bytes(), &line.text[token.start..token.end]),
            (Scalar::Str(text), Kind::Str) => line.string(at) == text,
            _ => false,
        })
    }

    fn bounds(&self, node: &Node, line: &Line<'_>, at: usize) -> Verdict {
        let token = line.tape[at];
        let tests: [(Option<i128>, fn(std::cmp::Ordering) -> bool); 4] = [
            (node.minimum, |order| order.is_ge()),
            (node.maximum, |order| order.is_le()),
            (node.exclusive_minimum, |order| order.is_gt()),
            (node.exclusive_maximum, |order| order.is_lt()),
        ];
        for (bound, holds) in tests {
            let bound = match bound {
                Some(bound) => bound,
                None => continue,
            };
            let order = if token.kind == Kind::Int {
                token.int.cmp(&bound)
            } else {
                if bound.abs() > EXACT_IN_DOUBLE {
                    return Err(Reject);
                }
                match line.float(at).partial_cmp(&(bound as f64)) {
                    Some(order) => order,
                    None => return Err(Reject),
                }
            };
            if !holds(order) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn lengths(&self, node: &Node, line: &mut Line<'_>, at: usize) -> bool {
        let token = line.tape[at];
        let length = if token.ascii && !token.escaped {
            token.end - token.start
        } else {
            line.string(at).chars().count()
        };
        node.min_length.map_or(true, |low| length >= low) && node.max_length.map_or(true, |high| length <= high)
    }

    fn object(&self, node: &Node, line: &mut Line<'_>, at: usize) -> Verdict {
        let end = line.tape[at].next;
        let mut seen = 0u64;
        let mut key = at + 1;
        while key < end {
            let value = key + 1;
            let token = line.tape[key];
            let entry = node.keys.find(token.int as u64, &line.text[token.start..token.end]);
            let property = entry.and_then(|entry| entry.1);
            if let Some(entry) = entry {
                seen |= entry.2;
            }
            match property.or(node.additional) {
                Some(sub) if !self.check(sub, line, value)? => return Ok(false),
                _ => {}
            }
            if let Some(names) = node.names {
                if !self.check(names, line, key)? {
                    return Ok(false);
                }
            }
            key = line.tape[value].next;
        }
        Ok(seen == node.required)
    }

    fn array(&self, node: &Node, line: &mut Line<'_>, at: usize) -> Verdict {
        let end = line.tape[at].next;
        let mut count = 0;
        let mut item = at + 1;
        while item < end {
            if let Some(sub) = node.items {
                if !self.check(sub, line, item)? {
                    return Ok(false);
                }
            }
            count += 1;
            item = line.tape[item].next;
        }
        Ok(node.min_items.map_or(true, |low| count >= low) && node.max_items.map_or(true, |high| count <= high))
    }

    /// Whether one line (its newline, if any, included) is a valid event the Python path would accept.
    fn accepts(&self, text: &[u8], tape: &mut Vec<Token>, keys: &mut Vec<usize>) -> bool {
        if Parser::read(text, tape, keys).is_err() || tape[0].kind != Kind::Object {
            return false;
        }
        let (mut name, mut version) = (None, None);
        let mut key = 1;
        while key < tape.len() {
            let token = tape[key];
            let value = tape[key + 1];
            match &text[token.start..token.end] {
                b"event" if value.kind == Kind::Str && !value.escaped => name = Some(&text[value.start..value.end]),
                b"schema_version" if value.kind == Kind::Int => version = Some(value.int),
                _ => {}
            }
            key = value.next;
            if name.is_some() && version.is_some() {
                break;
            }
        }
        let root = match (name, version) {
            (Some(name), Some(version)) => {
                match self.events.get(name).and_then(|versions| versions.iter().find(|entry| entry.0 == version)) {
                    Some(&(_, root)) => root,
                    None => return false,
                }
            }
            _ => return false,
        };
        let mut line = Line { text, tape, scratch: String::new() };
        matches!(self.check(root, &mut line, 0), Ok(true))
    }
}

#[pymethods]
impl EventDecoders {
    /// `table`: the decoder table's JSON, as `kvlog.schema.decoders.for_catalog` gives it.
    #[new]
    fn new(table: &[u8]) -> PyResult<Self> {
        let (mut tape, mut keys) = (Vec::new(), Vec::new());
        if Parser::read(table, &mut tape, &mut keys).is_err() {
            return Err(bad("not strict JSON"));
        }
        let members = match value_at(table, &tape, 0, &mut String::new()) {
            Value::Object(members) => members,
            _ => return Err(bad("not an object")),
        };
        match member(&members, "format") {
            Some(Value::Int(1)) => {}
            _ => return Err(bad("a format other than 1")),
        }
        let listed = |name: &str| member(&members, name).ok_or_else(|| bad(name)).and_then(|value| as_list(value, name));
        let pattern_values = listed("patterns")?;
        let node_values = listed("nodes")?;
        let patterns = pattern_values.iter().map(build_pattern).collect::<PyResult<Vec<_>>>()?;
        let nodes = node_values
            .iter()
            .map(|value| build_node(value, node_values.len(), patterns.len()))
            .collect::<PyResult<Vec<_>>>()?;
        let mut events = HashMap::default();
        for entry in listed("events")? {
            match as_list(entry, "an event")? {
                [Value::Str(name), Value::Int(version), Value::Int(root), ..] => {
                    let root = as_index(&Value::Int(*root), "an event's node", nodes.len())?;
                    events.entry(name.as_bytes().to_vec()).or_insert_with(Vec::new).push((*version, root));
                }
                [Value::Str(_), Value::Int(_), Value::Null, ..] => {} // undecided: its lines go to Python
                _ => return Err(bad("an event")),
            }
        }
        Ok(EventDecoders { nodes, patterns, events })
    }

    /// The lines of `data[begin:end]` (each ends at a newline, the last may not): how many, and the
    /// `(index, start, stop)` of each one not accepted (`stop` past its newline); a line longer than
    /// `max_line` bytes is never accepted. Runs without the GIL.
    fn rejected(
        &self,
        py: Python<'_>,
        data: &[u8],
        begin: usize,
        end: usize,
        max_line: usize,
    ) -> PyResult<(usize, Vec<(usize, usize, usize)>)> {
        if begin > end || end > data.len() {
            return Err(PyValueError::new_err("begin <= end <= len(data) is required"));
        }
        Ok(py.allow_threads(|| {
            let (mut tape, mut keys) = (Vec::with_capacity(256), Vec::with_capacity(64));
            let mut rejected = Vec::new();
            let (mut start, mut index) = (begin, 0);
            while start < end {
                let stop = memchr::memchr(b'\n', &data[start..end]).map_or(end, |at| start + at + 1);
                if stop - start > max_line || !self.accepts(&data[start..stop], &mut tape, &mut keys) {
                    rejected.push((index, start, stop));
                }
                index += 1;
                start = stop;
            }
            (index, rejected)
        }))
    }

    /// Whether one line is accepted (the tests' view of a single verdict).
    fn accepts_line(&self, line: &[u8]) -> bool {
        self.accepts(line, &mut Vec::new(), &mut Vec::new())
    }
}
