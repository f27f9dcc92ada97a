//! A keyed digest of a file's bytes, for telling that `packed-refs` is still the file read
//! before without keeping a copy of it (a run's file holds a line per experiment: at 100,000
//! experiments its copy was most of a long run's memory).
//!
//! The digest is a polynomial over the prime field of 2^61 - 1, evaluated at points drawn at
//! random when the process starts and never written anywhere: the bytes, cut in blocks of 7
//! (each below the prime), are the coefficients, the last block marked, and the length is the
//! last coefficient (and compared on its own too). For two different
//! files of at most `L` blocks, the chance over the points that their digests agree is at most
//! `L / (2^61 - 1)` per point (a non-zero polynomial of degree `L` has at most `L` roots), and
//! two points are used: for a `packed-refs` of 100 MB, below 10^-22 per rewrite. A rewrite
//! made to go unnoticed would need the points, which live only in hone's memory: an agent that
//! can read that memory (root in hone's own PID namespace, outside the sandbox, through ptrace
//! or `/proc/PID/mem`) could as well rewrite it, so this is no weaker than the exact comparison
//! with a kept copy it replaces. Unlike a file stamp (size, mtime, inode), nothing about the
//! file's metadata stands in for its bytes.

use std::hash::BuildHasher;
use std::sync::OnceLock;

/// The prime 2^61 - 1.
const P: u64 = (1 << 61) - 1;

/// Bytes per coefficient: 56 bits, below the prime, so that no two blocks are the same number.
const BLOCK: usize = 7;

/// `x` reduced modulo [`P`] (any `x`).
fn reduce(x: u128) -> u64 {
    let p = u128::from(P);
    // 2^61 is 1 modulo P: fold the bits above 61 onto the ones below, twice.
    let r = (x & p) + (x >> 61);
    let r = ((r & p) + (r >> 61)) as u64;
    if r >= P {
        r - P
    } else {
        r
    }
}

fn mul(a: u64, b: u64) -> u128 {
    u128::from(a) * u128::from(b)
}

/// How many blocks are taken in with one reduction.
const GROUP: usize = 8;

/// The points, drawn once per process from the operating system's random source (on Linux
/// `getrandom`, else the standard library's randomly keyed hasher), each with its powers 1 to
/// [`GROUP`].
fn points() -> &'static [[u64; GROUP]; 2] {
    static POINTS: OnceLock<[[u64; GROUP]; 2]> = OnceLock::new();
    POINTS.get_or_init(|| {
        let seeds = random_words();
        let draw = |seed: u64| {
            // Neither 0 nor 1 (degenerate points; P itself is 0).
            let k = (seed % P).max(2);
            let mut powers = [k; GROUP];
            for j in 1..GROUP {
                powers[j] = reduce(mul(powers[j - 1], k));
            }
            powers
        };
        [draw(seeds[0]), draw(seeds[1])]
    })
}

/// Two words from the operating system's random source.
fn random_words() -> [u64; 2] {
    #[cfg(target_os = "linux")]
    {
        let mut buf = [0u8; 16];
        // SAFETY: `buf` is valid for writes of its 16 bytes; flags 0 is the blocking,
        // urandom-backed source (it blocks only before the kernel's pool is first seeded).
        let got = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
        if got == 16 {
            let (a, b) = buf.split_at(8);
            let word = |b: &[u8]| {
                let mut w = [0u8; 8];
                w.copy_from_slice(b);
                u64::from_le_bytes(w)
            };
            return [word(a), word(b)];
        }
    }
    let state = std::collections::hash_map::RandomState::new();
    [state.hash_one(1u64), state.hash_one(2u64)]
}

/// The 8 bytes of `g` at `at` as a little-endian number (`g` holds them).
fn word(g: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&g[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The block `b` (at most 7 bytes) as a number.
fn block(b: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word[..b.len()].copy_from_slice(b);
    u64::from_le_bytes(word)
}

/// A digest computed as the bytes come, in pieces of any size.
#[derive(Clone, Debug)]
pub(super) struct Digester {
    h: [u64; 2],
    /// Bytes of a block not complete yet.
    pending: [u8; BLOCK],
    pending_len: usize,
    len: u64,
}

/// What a digest says of a file: its length and the two evaluations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct Digest {
    pub(crate) len: u64,
    h: [u64; 2],
}

impl Digester {
    pub(super) fn new() -> Digester {
        Digester {
            h: [0; 2],
            pending: [0; BLOCK],
            pending_len: 0,
            len: 0,
        }
    }

    /// Takes one block in.
    fn step(&mut self, m: u64) {
        let k = points();
        for (h, k) in self.h.iter_mut().zip(k) {
            *h = reduce(mul(*h, k[0]) + u128::from(m));
        }
    }

    /// Takes `bytes` in.
    pub(super) fn update(&mut self, mut bytes: &[u8]) {
        self.len += bytes.len() as u64;
        if self.pending_len > 0 {
            let take = (BLOCK - self.pending_len).min(bytes.len());
            self.pending[self.pending_len..self.pending_len + take].copy_from_slice(&bytes[..take]);
            self.pending_len += take;
            bytes = &bytes[take..];
            if self.pending_len < BLOCK {
                return;
            }
            let m = block(&self.pending);
            self.step(m);
            self.pending_len = 0;
        }
        // Eight blocks at a time: h * k^8 + m0 * k^7 + ... + m6 * k + m7, one reduction (nine
        // products below 2^122 each: the sum stays below 2^126).
        let k = points();
        const LOW: u64 = (1 << 56) - 1;
        let mut groups = bytes.chunks_exact(GROUP * BLOCK);
        for g in &mut groups {
            let m = [
                word(g, 0) & LOW,
                word(g, 7) & LOW,
                word(g, 14) & LOW,
                word(g, 21) & LOW,
                word(g, 28) & LOW,
                word(g, 35) & LOW,
                word(g, 42) & LOW,
                word(g, 48) >> 8,
            ];
            for (h, k) in self.h.iter_mut().zip(k) {
                let mut sum = mul(*h, k[GROUP - 1]) + u128::from(m[GROUP - 1]);
                for j in 0..GROUP - 1 {
                    sum += mul(m[j], k[GROUP - 2 - j]);
                }
                *h = reduce(sum);
            }
        }
        let mut rest = groups.remainder().chunks_exact(BLOCK);
        for b in &mut rest {
            self.step(block(b));
        }
        let tail = rest.remainder();
        self.pending[..tail.len()].copy_from_slice(tail);
        self.pending_len = tail.len();
    }

    /// The digest of everything taken in: the blocks, the last one marked by a bit above its
    /// bytes (a block of its own, `1`, when the length is a multiple of 7), then the length as
    /// one more block.
    pub(super) fn finish(mut self) -> Digest {
        let len = self.len;
        let mut last = block(&self.pending[..self.pending_len]);
        last |= 1 << (8 * self.pending_len);
        self.step(last);
        // The length as one more block (below 2^56 for any file read here).
        self.step(len & ((1 << 56) - 1));
        Digest { len, h: self.h }
    }
}

/// The digest of `bytes` at once.
#[cfg(test)]
pub(super) fn digest(bytes: &[u8]) -> Digest {
    let mut d = Digester::new();
    d.update(bytes);
    d.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_does_not_depend_on_how_the_bytes_come() {
        let bytes: Vec<u8> = (0..1000u32).map(|i| (i * 37 % 251) as u8).collect();
        let whole = digest(&bytes);
        for piece in [1, 3, 6, 7, 8, 27, 28, 29, 64, 999] {
            let mut d = Digester::new();
            for c in bytes.chunks(piece) {
                d.update(c);
            }
            assert_eq!(d.finish(), whole, "pieces of {piece}");
        }
    }

    /// The definition, one block at a time: Horner's rule over the blocks, the marked last
    /// one and the length.
    fn naive(bytes: &[u8]) -> [u64; 2] {
        let k = points();
        let mut blocks: Vec<u64> = bytes.chunks(BLOCK).map(block).collect();
        let tail = bytes.len() % BLOCK;
        if tail == 0 {
            blocks.push(1);
        } else if let Some(last) = blocks.last_mut() {
            *last |= 1 << (8 * tail);
        }
        blocks.push(bytes.len() as u64);
        let mut h = [0u64; 2];
        for m in blocks {
            for (h, k) in h.iter_mut().zip(k) {
                *h = reduce(mul(*h, k[0]) + u128::from(m));
            }
        }
        h
    }

    #[test]
    fn the_digest_is_its_definition() {
        let bytes: Vec<u8> = (0..2000u32).map(|i| (i * 97 % 256) as u8).collect();
        for len in [0, 1, 6, 7, 8, 55, 56, 57, 63, 112, 113, 1000, 2000] {
            assert_eq!(digest(&bytes[..len]).h, naive(&bytes[..len]), "{len} bytes");
        }
        let ones = vec![0xffu8; 777];
        assert_eq!(digest(&ones).h, naive(&ones));
    }

    #[test]
    fn every_change_of_bytes_or_length_changes_the_digest() {
        let bytes: Vec<u8> = (0..300u32).map(|i| (i * 11 % 256) as u8).collect();
        let whole = digest(&bytes);
        for i in 0..bytes.len() {
            for flip in [1u8, 0x80, 0xff] {
                let mut other = bytes.clone();
                other[i] ^= flip;
                assert_ne!(digest(&other), whole, "byte {i} ^ {flip}");
            }
        }
        // Trailing zeros, a shorter file, an empty one, blocks swapped.
        let mut longer = bytes.clone();
        longer.push(0);
        assert_ne!(digest(&longer), whole);
        assert_ne!(digest(&bytes[..299]), whole);
        assert_ne!(digest(&[]), digest(&[0]));
        assert_ne!(digest(&[0; 7]), digest(&[0; 14]));
        let mut swapped = bytes.clone();
        swapped[..7].copy_from_slice(&bytes[7..14]);
        swapped[7..14].copy_from_slice(&bytes[..7]);
        assert_ne!(digest(&swapped), whole);
        assert_eq!(digest(&bytes), whole);
    }

    #[test]
    fn reduction_is_exact_at_the_edges() {
        for x in [
            0u128,
            1,
            P as u128,
            P as u128 + 1,
            (P as u128) * (P as u128) - 1,
        ] {
            assert_eq!(u128::from(reduce(x)), x % (P as u128), "{x}");
        }
        let big = (P as u128 - 1) * (P as u128 - 1) * 9 + (P as u128 - 1);
        assert_eq!(u128::from(reduce(big)), big % (P as u128));
        for x in [u128::MAX, u128::MAX - 1, 1 << 127, (1 << 126) + 12345] {
            assert_eq!(u128::from(reduce(x)), x % (P as u128), "{x}");
        }
    }
}
