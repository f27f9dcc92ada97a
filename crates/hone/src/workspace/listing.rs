//! A listing of refs as the integrity checks compare them: what `packed-refs` holds under a
//! prefix, shared between the listings read from the same bytes (the run's archive refs grow
//! by one per experiment: copying them at every check made each one cost as much as the run
//! was long), and a few more refs beside it (the loose ones, which override a packed ref of the
//! same name, and the run branch). Two listings read from the same `packed-refs` bytes compare
//! by their few other refs alone.

use std::cmp::Ordering;
use std::sync::Arc;

/// The refs of one `packed-refs` file under a prefix: the file's text (the very bytes read,
/// shared with what the reader keeps to compare the next read against) and, for each ref
/// listed, where its object name and its name are in it. A ref costs 12 bytes here beyond its
/// line of the file (as owned strings it cost about 130: a run holds a ref per experiment).
#[derive(Debug, Default)]
pub(crate) struct PackedRefs {
    /// Shared with the listings of other prefixes read from the same bytes.
    text: Arc<String>,
    /// (start of the object name, start of the name, end of the name) in `text`, by name.
    lines: Vec<(u32, u32, u32)>,
}

impl PackedRefs {
    /// The refs of `text` at `lines` (each a range of `text` on character boundaries; the
    /// names sorted and unique).
    pub(super) fn new(text: Arc<String>, lines: Vec<(u32, u32, u32)>) -> PackedRefs {
        let refs = PackedRefs { text, lines };
        debug_assert!(
            (1..refs.len()).all(|i| refs.at(i - 1).0 < refs.at(i).0),
            "sorted, unique"
        );
        refs
    }

    /// The refs of `pairs` (name, value), sorted by name and unique, as one text.
    #[cfg(test)]
    pub(super) fn of_pairs(pairs: &[(String, String)]) -> PackedRefs {
        let (mut text, mut lines) = (String::new(), Vec::new());
        for (name, value) in pairs {
            let id = text.len() as u32;
            text.push_str(value);
            text.push(' ');
            let at = text.len() as u32;
            text.push_str(name);
            lines.push((id, at, text.len() as u32));
            text.push('\n');
        }
        PackedRefs::new(Arc::new(text), lines)
    }

    /// The text the refs were read from.
    pub(super) fn text(&self) -> &Arc<String> {
        &self.text
    }

    fn len(&self) -> usize {
        self.lines.len()
    }

    /// The `i`th ref as (name, value).
    fn at(&self, i: usize) -> (&str, &str) {
        let (id, name, end) = self.lines[i];
        let (id, name, end) = (id as usize, name as usize, end as usize);
        (&self.text[name..end], &self.text[id..name - 1])
    }

    /// What the ref `name` holds here, if it is listed.
    fn get(&self, name: &str) -> Option<&str> {
        let i = self
            .lines
            .binary_search_by(|&(_, at, end)| self.text[at as usize..end as usize].cmp(name))
            .ok()?;
        Some(self.at(i).1)
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

    /// Every ref, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        Merged {
            packed: &self.packed,
            next: 0,
            others: self.others.as_slice(),
        }
    }

    /// What the ref `name` holds, if it is listed.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.others
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .map(|i| self.others[i].1.as_str())
            .or_else(|| self.packed.get(name))
    }

    /// Every ref, in name order, as owned pairs.
    pub fn to_vec(&self) -> Vec<(String, String)> {
        self.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    /// Were both listings' packed refs read from the same bytes (and parsed once)?
    #[cfg(test)]
    pub(crate) fn shares_packed_with(&self, other: &RefListing) -> bool {
        Arc::ptr_eq(&self.packed, &other.packed) && self.packed.len() > 0
    }

    /// Do both listings hold the one copy of the same `packed-refs` text?
    #[cfg(test)]
    pub(crate) fn shares_text_with(&self, other: &RefListing) -> bool {
        Arc::ptr_eq(self.packed.text(), other.packed.text()) && !self.packed.text().is_empty()
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
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<(&'a str, &'a str)> {
        let packed = (self.next < self.packed.len()).then(|| self.packed.at(self.next));
        let other = self.others.first().map(|(n, v)| (n.as_str(), v.as_str()));
        let order = match (packed, other) {
            (Some((p, _)), Some((o, _))) => p.cmp(o),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => return None,
        };
        if order != Ordering::Greater {
            self.next += 1;
        }
        if order == Ordering::Less {
            return packed;
        }
        self.others = &self.others[1..];
        other
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

    #[test]
    fn loose_refs_hide_packed_ones_and_the_walk_is_in_name_order() {
        let packed = Arc::new(PackedRefs::of_pairs(&pairs(&[
            ("refs/a/1", "p1"),
            ("refs/a/3", "p3"),
        ])));
        let l = RefListing::of(
            packed.clone(),
            pairs(&[
                ("refs/a/3", "l3"),
                ("refs/a/2", "l2"),
                ("refs/heads/b", "h"),
            ]),
        );
        assert_eq!(
            l.to_vec(),
            pairs(&[
                ("refs/a/1", "p1"),
                ("refs/a/2", "l2"),
                ("refs/a/3", "l3"),
                ("refs/heads/b", "h")
            ])
        );
        assert_eq!(l.get("refs/a/3"), Some("l3"));
        assert_eq!(l.get("refs/a/1"), Some("p1"));
        assert_eq!(l.get("refs/a/4"), None);
        // The same refs however they are held: equal; one value apart: not.
        let flat = RefListing::new(l.to_vec());
        assert_eq!(l, flat);
        let shared = RefListing::of(packed.clone(), pairs(&[("refs/a/1", "p1")]));
        assert_eq!(
            shared,
            RefListing::new(pairs(&[("refs/a/1", "p1"), ("refs/a/3", "p3")]))
        );
        let moved = RefListing::of(packed, pairs(&[("refs/a/1", "px")]));
        assert_ne!(shared, moved);
        assert_ne!(l, RefListing::new(pairs(&[("refs/a/1", "p1")])));
        assert!(RefListing::default().is_empty() && !l.is_empty());
    }
}
