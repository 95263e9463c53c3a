//! Framing tests (being written).
