//! Knobs: literal constants in editable files, their search domains, and in-place rewriting.
