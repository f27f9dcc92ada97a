//! A listing of refs as the integrity checks compare them: what `packed-refs` holds under a
//! prefix, shared between the listings read from the same bytes (the run's archive refs grow
//! by one per experiment: copying them at every check made each one cost as much as the run
//! was long), and a few more refs beside it (the loose ones, which override a packed ref of the
//! same name, and the run branch). Two listings read from the same `packed-refs` bytes compare
//! by their few other refs alone.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::sync::Arc;

use super::digest::Digest;

/// The refs of one `packed-refs` file under a prefix, compactly: each ref's object name as its
/// 20 bytes and its name as what follows the prefix (about 26 bytes a ref for a run's archive
/// refs; the file's line is about 62, and a run holds a ref per experiment), with the digest
/// of the bytes they were read from.
#[derive(Debug, Default)]
pub(crate) struct PackedRefs {
    /// The digest of the `packed-refs` bytes these were read from.
    digest: Digest,
    /// The common start of every name listed.
    prefix: String,
    /// Each ref's object name, in the order of the names.
    ids: Vec<[u8; 20]>,
    /// What follows `prefix` in each name, one after another.
    rests: String,
    /// Where each name's rest ends in `rests`.
    ends: Vec<u32>,
}

/// The 20 bytes of an object name written as 40 lower-case hex digits; `None` otherwise.
fn id_bytes(hex: &str) -> Option<[u8; 20]> {
    let digits = hex.as_bytes();
    let value = |d: u8| match d {
        b'0'..=b'9' => Some(d - b'0'),
        b'a'..=b'f' => Some(d - b'a' + 10),
        _ => None,
    };
    if digits.len() != 40 {
        return None;
    }
    let mut id = [0u8; 20];
    for (byte, pair) in id.iter_mut().zip(digits.chunks_exact(2)) {
        *byte = value(pair[0])? << 4 | value(pair[1])?;
    }
    Some(id)
}

/// `id` as 40 lower-case hex digits.
fn id_hex(id: &[u8; 20]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(40);
    for b in id {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

/// `prefix` followed by `rest` compared with `name`, without joining them.
fn cmp_joined(prefix: &str, rest: &str, name: &str) -> Ordering {
    let (p, r, n) = (prefix.as_bytes(), rest.as_bytes(), name.as_bytes());
    let head = p.len().min(n.len());
    p[..head]
        .cmp(&n[..head])
        .then_with(|| match n.get(p.len()..) {
            Some(tail) => r.cmp(tail),
            // `name` is shorter than the prefix and its start: the joined name is longer.
            None => Ordering::Greater,
        })
}

impl PackedRefs {
    /// No refs yet, under `prefix` (read from bytes of digest `digest`).
    pub(super) fn new(prefix: &str, digest: Digest) -> PackedRefs {
        PackedRefs {
            digest,
            prefix: prefix.to_string(),
            ..PackedRefs::default()
        }
    }

    /// Adds the ref `name` (which starts with the prefix, after every one added) holding
    /// `id`; `false` (nothing added) for an object name that is not 40 lower-case hex digits
    /// or a name out of place.
    pub(super) fn push(&mut self, name: &str, id: &str) -> bool {
        let (Some(rest), Some(id)) = (name.strip_prefix(self.prefix.as_str()), id_bytes(id)) else {
            return false;
        };
        let after_last = self.len() == 0 || self.rest(self.len() - 1) < rest;
        let Ok(end) = u32::try_from(self.rests.len() + rest.len()) else {
            return false;
        };
        if !after_last {
            return false;
        }
        self.rests.push_str(rest);
        self.ends.push(end);
        self.ids.push(id);
        true
    }

    /// Done adding, the bytes read having the digest `digest`: no spare room kept.
    pub(super) fn finished(mut self, digest: Digest) -> PackedRefs {
        self.digest = digest;
        self.rests.shrink_to_fit();
        self.ends.shrink_to_fit();
        self.ids.shrink_to_fit();
        self
    }

    /// The refs of `pairs` (name, value), sorted by name and unique, each value 40 hex digits.
    #[cfg(test)]
    pub(super) fn of_pairs(pairs: &[(String, String)]) -> PackedRefs {
        let mut refs = PackedRefs::new("", Digest::default());
        for (name, value) in pairs {
            assert!(refs.push(name, value), "{name} {value}");
        }
        refs.finished(Digest::default())
    }

    /// The digest of the bytes the refs were read from.
    pub(super) fn digest(&self) -> Digest {
        self.digest
    }

    /// About how many bytes the refs take.
    pub(super) fn size(&self) -> usize {
        self.ids.len() * 24 + self.rests.len() + self.prefix.len()
    }

    fn len(&self) -> usize {
        self.ids.len()
    }

    /// What follows the prefix in the `i`th name.
    fn rest(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.rests[start..self.ends[i] as usize]
    }

    /// The `i`th ref as (name, value).
    fn at(&self, i: usize) -> (String, String) {
        (
            format!("{}{}", self.prefix, self.rest(i)),
            id_hex(&self.ids[i]),
        )
    }

    /// What the ref `name` holds here, if it is listed.
    fn get(&self, name: &str) -> Option<String> {
        let rest = name.strip_prefix(self.prefix.as_str())?;
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.rest(mid).cmp(rest) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Some(id_hex(&self.ids[mid])),
            }
        }
        None
    }
}

/// Refs as (name, what it holds), read in one go; iterated in name order.
#[derive(Clone, Debug, Default)]
pub struct RefListing {
    packed: Arc<PackedRefs>,
    /// Sorted by name, names unique; one of these overrides a packed ref of the same name.
    others: Vec<(String, String)>,
}

impl RefListing {
    /// A listing of `refs` (names unique).
    pub fn new(refs: Vec<(String, String)>) -> RefListing {
        RefListing::of(Arc::new(PackedRefs::default()), refs)
    }

    /// A listing of the `packed` refs with `others` (names unique) over them.
    pub(super) fn of(packed: Arc<PackedRefs>, mut others: Vec<(String, String)>) -> RefListing {
        others.sort();
        debug_assert!(others.windows(2).all(|w| w[0].0 < w[1].0), "names unique");
        RefListing { packed, others }
    }

    /// This listing with the ref `name` holding `value` (over a listed one of that name).
    pub(super) fn with(mut self, name: String, value: String) -> RefListing {
        self.others.retain(|(n, _)| *n != name);
        self.others.push((name, value));
        self.others.sort();
        self
    }

    /// Every ref, in name order (a packed one's name and value made for it).
    pub fn iter(&self) -> impl Iterator<Item = (Cow<'_, str>, Cow<'_, str>)> + '_ {
        Merged {
            packed: &self.packed,
            next: 0,
            others: self.others.as_slice(),
        }
    }

    /// What the ref `name` holds, if it is listed.
    pub fn get(&self, name: &str) -> Option<Cow<'_, str>> {
        match self.others.binary_search_by(|(n, _)| n.as_str().cmp(name)) {
            Ok(i) => Some(Cow::Borrowed(self.others[i].1.as_str())),
            Err(_) => self.packed.get(name).map(Cow::Owned),
        }
    }

    /// Every ref, in name order, as owned pairs.
    pub fn to_vec(&self) -> Vec<(String, String)> {
        self.iter()
            .map(|(n, v)| (n.into_owned(), v.into_owned()))
            .collect()
    }

    /// Were both listings' packed refs read from the same bytes (and parsed once)?
    #[cfg(test)]
    pub(crate) fn shares_packed_with(&self, other: &RefListing) -> bool {
        Arc::ptr_eq(&self.packed, &other.packed) && self.packed.len() > 0
    }

    /// Were both listings' packed refs read from the same `packed-refs` bytes (by digest)?
    #[cfg(test)]
    pub(crate) fn same_bytes_as(&self, other: &RefListing) -> bool {
        self.packed.digest() == other.packed.digest() && self.packed.digest().len > 0
    }

    /// Is nothing listed?
    pub fn is_empty(&self) -> bool {
        self.packed.len() == 0 && self.others.is_empty()
    }
}

impl PartialEq for RefListing {
    /// The same refs holding the same values. Listings read from the same `packed-refs` bytes
    /// share their packed refs: equal other refs then make them equal without a walk.
    fn eq(&self, other: &RefListing) -> bool {
        (Arc::ptr_eq(&self.packed, &other.packed) && self.others == other.others)
            || self.iter().eq(other.iter())
    }
}

impl Eq for RefListing {}

/// Two sorted lists walked as one, a name in `others` hiding the same name in `packed`.
struct Merged<'a> {
    packed: &'a PackedRefs,
    /// The index of the next packed ref.
    next: usize,
    others: &'a [(String, String)],
}

impl<'a> Iterator for Merged<'a> {
    type Item = (Cow<'a, str>, Cow<'a, str>);

    fn next(&mut self) -> Option<Self::Item> {
        let packed = (self.next < self.packed.len()).then(|| self.packed.rest(self.next));
        let other = self.others.first();
        let order = match (packed, other) {
            (Some(rest), Some((o, _))) => cmp_joined(&self.packed.prefix, rest, o),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => return None,
        };
        if order != Ordering::Greater {
            self.next += 1;
        }
        if order == Ordering::Less {
            let (name, value) = self.packed.at(self.next - 1);
            return Some((Cow::Owned(name), Cow::Owned(value)));
        }
        self.others = &self.others[1..];
        other.map(|(n, v)| (Cow::Borrowed(n.as_str()), Cow::Borrowed(v.as_str())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    const P1: &str = "1111111111111111111111111111111111111111";
    const P3: &str = "3333333333333333333333333333333333333333";
    const PX: &str = "abababababababababababababababababababab";
    const L2: &str = "2222222222222222222222222222222222222222";
    const L3: &str = "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd";
    const H: &str = "0123456789abcdef0123456789abcdef01234567";

    #[test]
    fn refs_under_a_prefix_merge_with_others_below_and_above_it() {
        let mut packed = PackedRefs::new("refs/hone/t/", Digest::default());
        for (name, id) in [
            ("refs/hone/t/1", P1),
            ("refs/hone/t/10", P3),
            ("refs/hone/t/2", PX),
        ] {
            assert!(packed.push(name, id));
        }
        // Out of order, outside the prefix, or not an object name: refused.
        assert!(!packed.push("refs/hone/t/15", P1));
        assert!(!packed.push("refs/hone/u/3", P1));
        assert!(!packed.push("refs/hone/t/3", "p1"));
        let packed = Arc::new(packed.finished(Digest::default()));
        let l = RefListing::of(
            packed,
            pairs(&[
                ("refs/heads/hone/t", H),
                ("refs/hone/t", L2),
                ("refs/hone/t/10", L3),
                ("refs/hone/t/3", L2),
                ("refs/zz", H),
                ("refs", H),
            ]),
        );
        let names: Vec<String> = l.iter().map(|(n, _)| n.into_owned()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        assert_eq!(names.len(), 8);
        assert_eq!(
            l.get("refs/hone/t/10").as_deref(),
            Some(L3),
            "the loose one"
        );
        assert_eq!(l.get("refs/hone/t/2").as_deref(), Some(PX));
        assert_eq!(l.get("refs/hone/t/").as_deref(), None);
        assert_eq!(l.get("refs/hone/t").as_deref(), Some(L2));
        for (rest, full, order) in [
            ("1", "refs", Ordering::Greater),
            ("1", "refs/hone/t/1", Ordering::Equal),
            ("1", "refs/hone/t/10", Ordering::Less),
            ("2", "refs/hone/t/10", Ordering::Greater),
            ("1", "refs/hone/u", Ordering::Less),
        ] {
            assert_eq!(
                cmp_joined("refs/hone/t/", rest, full),
                order,
                "{rest} against {full}"
            );
        }
    }

    #[test]
    fn loose_refs_hide_packed_ones_and_the_walk_is_in_name_order() {
        let packed = Arc::new(PackedRefs::of_pairs(&pairs(&[
            ("refs/a/1", P1),
            ("refs/a/3", P3),
        ])));
        let l = RefListing::of(
            packed.clone(),
            pairs(&[("refs/a/3", L3), ("refs/a/2", L2), ("refs/heads/b", H)]),
        );
        assert_eq!(
            l.to_vec(),
            pairs(&[
                ("refs/a/1", P1),
                ("refs/a/2", L2),
                ("refs/a/3", L3),
                ("refs/heads/b", H)
            ])
        );
        assert_eq!(l.get("refs/a/3").as_deref(), Some(L3));
        assert_eq!(l.get("refs/a/1").as_deref(), Some(P1));
        assert_eq!(l.get("refs/a/4"), None);
        // The same refs however they are held: equal; one value apart: not.
        let flat = RefListing::new(l.to_vec());
        assert_eq!(l, flat);
        let shared = RefListing::of(packed.clone(), pairs(&[("refs/a/1", P1)]));
        assert_eq!(
            shared,
            RefListing::new(pairs(&[("refs/a/1", P1), ("refs/a/3", P3)]))
        );
        let moved = RefListing::of(packed, pairs(&[("refs/a/1", PX)]));
        assert_ne!(shared, moved);
        assert_ne!(l, RefListing::new(pairs(&[("refs/a/1", P1)])));
        assert!(RefListing::default().is_empty() && !l.is_empty());
    }
}
