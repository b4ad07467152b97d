"""Rust snippets: a tokenizer, word frequencies, a ring buffer, config parsing, binary search."""

# Snippet code is source text kept verbatim; some of its lines are longer than the house limit.
# ruff: noqa: E501
from __future__ import annotations

from tools.promptgen.model import Bug, Snippet

RUST: tuple[Snippet, ...] = (
    Snippet(
        "rs_tokenizer", "rust", "tokenize",
        "tokenizes arithmetic expressions into numbers, operators and parentheses",
        "Write a Rust function `tokenize(input: &str) -> Result<Vec<Token>, String>` with `enum "
        "Token { Num(f64), Op(char), LParen, RParen }`. Skip whitespace, read decimal numbers "
        "such as 3.25, accept + - * / as operators and return an error naming the position of "
        "any other character.",
        r'''#[derive(Debug, Clone, PartialEq)]
pub enum Token {
    Num(f64),
    Op(char),
    LParen,
    RParen,
}

pub fn tokenize(input: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = input.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' => i += 1,
            '+' | '-' | '*' | '/' => {
                tokens.push(Token::Op(c));
                i += 1;
            }
            '(' => {
                tokens.push(Token::LParen);
                i += 1;
            }
            ')' => {
                tokens.push(Token::RParen);
                i += 1;
            }
            '0'..='9' | '.' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                    i += 1;
                }
                let text: String = chars[start..i].iter().collect();
                let value = text
                    .parse::<f64>()
                    .map_err(|_| format!("bad number {:?} at {}", text, start))?;
                tokens.push(Token::Num(value));
            }
            other => return Err(format!("unexpected {:?} at {}", other, i)),
        }
    }
    Ok(tokens)
}
''',
        {"tokenize": ("lex", "scan_tokens", "tokenise"), "Token": ("Tok", "Lexeme")},
        (Bug("            ')' => {\n                tokens.push(Token::RParen);\n                i += 1;",
             "            ')' => {\n                tokens.push(Token::RParen);",
             "running 3 tests\ntest tests::parens ... FAILED\n\nfailures:\n\n---- tests::parens stdout ----\n"
             "thread 'tests::parens' has overflowed its stack\n(test timed out after 60 seconds)\n\n"
             "error: test failed, to rerun pass `--lib`"),),
        (),
    ),
    Snippet(
        "rs_word_freq", "rust", "word_frequencies",
        "counts word frequencies with a HashMap and returns the top n sorted by count then word",
        "Write `fn word_frequencies(text: &str, n: usize) -> Vec<(String, usize)>` in Rust that "
        "lowercases words (split on non-alphanumeric characters), counts them with a HashMap and "
        "returns the n most frequent, ordered by count descending then alphabetically.",
        r'''use std::collections::HashMap;

pub fn word_frequencies(text: &str, n: usize) -> Vec<(String, usize)> {
    let mut counts: HashMap<String, usize> = HashMap::new();
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        *counts.entry(word.to_lowercase()).or_insert(0) += 1;
    }
    let mut ranked: Vec<(String, usize)> = counts.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    ranked.truncate(n);
    ranked
}
''',
        {"word_frequencies": ("top_words", "count_words", "rank_words")},
        (Bug("b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0))", "b.1.cmp(&a.1)",
             "---- tests::ties_are_alphabetical stdout ----\nthread 'tests::ties_are_alphabetical' "
             "panicked at src/lib.rs:41:9:\nassertion `left == right` failed\n  left: "
             "[(\"b\", 1), (\"a\", 1)]\n right: [(\"a\", 1), (\"b\", 1)]"),),
        (),
    ),
    Snippet(
        "rs_ring_buffer", "rust", "RingBuffer",
        "is a fixed-capacity ring buffer that overwrites the oldest element when full",
        "Implement `struct RingBuffer<T>` in Rust with `new(capacity: usize)`, `push(&mut self, "
        "value: T) -> Option<T>` (returns the overwritten oldest value when full), `pop(&mut "
        "self) -> Option<T>` (oldest first), `len` and `is_empty`. Panic in `new` when capacity is "
        "zero. Use a Vec<Option<T>> and head/len indices.",
        r'''pub struct RingBuffer<T> {
    slots: Vec<Option<T>>,
    head: usize,
    len: usize,
}

impl<T> RingBuffer<T> {
    pub fn new(capacity: usize) -> Self {
        assert!(capacity > 0, "capacity must be positive");
        let mut slots = Vec::with_capacity(capacity);
        slots.resize_with(capacity, || None);
        RingBuffer { slots, head: 0, len: 0 }
    }

    pub fn push(&mut self, value: T) -> Option<T> {
        let cap = self.slots.len();
        let tail = (self.head + self.len) % cap;
        let evicted = self.slots[tail].replace(value);
        if self.len == cap {
            self.head = (self.head + 1) % cap;
        } else {
            self.len += 1;
        }
        evicted
    }

    pub fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let value = self.slots[self.head].take();
        self.head = (self.head + 1) % self.slots.len();
        self.len -= 1;
        value
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}
''',
        {"RingBuffer": ("CircularBuffer", "Ring", "BoundedQueue"), "slots": ("cells", "buf")},
        (Bug("        self.head = (self.head + 1) % self.slots.len();\n        self.len -= 1;",
             "        self.len -= 1;",
             "---- tests::fifo_order stdout ----\nthread 'tests::fifo_order' panicked at src/ring.rs:88:9:\n"
             "assertion `left == right` failed\n  left: None\n right: Some(2)"),),
        (),
    ),
    Snippet(
        "rs_config", "rust", "parse_config",
        "parses INI-style sections into nested HashMaps with line-numbered errors",
        "Write `fn parse_config(text: &str) -> Result<HashMap<String, HashMap<String, String>>, "
        "ConfigError>` in Rust for INI-like text: `[section]` headers, `key = value` lines, blank "
        "lines and ';' comments. Keys before any section go to section \"\". ConfigError carries "
        "the 1-based line number and a message and implements Display.",
        r'''use std::collections::HashMap;
use std::fmt;

#[derive(Debug, PartialEq)]
pub struct ConfigError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

pub fn parse_config(text: &str) -> Result<HashMap<String, HashMap<String, String>>, ConfigError> {
    let mut sections: HashMap<String, HashMap<String, String>> = HashMap::new();
    let mut current = String::new();
    for (idx, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = name.trim().to_string();
            sections.entry(current.clone()).or_default();
            continue;
        }
        let (key, value) = line.split_once('=').ok_or_else(|| ConfigError {
            line: idx + 1,
            message: format!("expected key = value, got {:?}", line),
        })?;
        sections
            .entry(current.clone())
            .or_default()
            .insert(key.trim().to_string(), value.trim().to_string());
    }
    Ok(sections)
}
''',
        {"parse_config": ("parse_ini", "read_sections", "load_ini"), "ConfigError": ("IniError", "ParseError")},
        (Bug("line: idx + 1,", "line: idx,",
             "---- tests::reports_line_numbers stdout ----\nthread 'tests::reports_line_numbers' panicked "
             "at src/config.rs:77:9:\nassertion `left == right` failed\n  left: 2\n right: 3"),),
        (),
    ),
    Snippet(
        "rs_binary_search", "rust", "find_first_ge",
        "returns the index of the first element >= target in a sorted slice",
        "Write a generic Rust function `find_first_ge<T: Ord>(sorted: &[T], target: &T) -> usize` "
        "that performs a lower-bound binary search without using the standard library's search "
        "helpers, returning sorted.len() when every element is smaller.",
        r'''pub fn find_first_ge<T: Ord>(sorted: &[T], target: &T) -> usize {
    let (mut lo, mut hi) = (0usize, sorted.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if sorted[mid] < *target {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}
''',
        {"find_first_ge": ("lower_bound", "partition_point_ge", "search_left")},
        (Bug("let (mut lo, mut hi) = (0usize, sorted.len());", "let (mut lo, mut hi) = (0usize, sorted.len() - 1);",
             "---- tests::empty_slice stdout ----\nthread 'tests::empty_slice' panicked at src/search.rs:2:44:\n"
             "attempt to subtract with overflow"),),
        (),
    ),
)
