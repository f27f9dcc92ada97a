//! A listing of refs as the integrity checks compare them: what `packed-refs` holds under a
//! prefix, shared between the listings read from the same bytes (the run's archive refs grow
//! by one per experiment: copying them at every check made each one cost as much as the run
//! was long), and a few more refs beside it (the loose ones, which override a packed ref of the
//! same name, and the run branch). Two listings read from the same `packed-refs` bytes compare
//! by their few other refs alone.

use std::cmp::Ordering;
use std::sync::Arc;

/// Refs as (name, what it holds), read in one go; iterated in name order.
#[derive(Clone, Debug, Default)]
pub struct RefListing {
    /// Sorted by name, names unique.
    packed: Arc<Vec<(String, String)>>,
    /// Sorted by name, names unique; one of these overrides a packed ref of the same name.
    others: Vec<(String, String)>,
}

impl RefListing {
    /// A listing of `refs` (names unique).
    pub fn new(refs: Vec<(String, String)>) -> RefListing {
        RefListing::of(Arc::new(Vec::new()), refs)
    }

    /// A listing of the `packed` refs (sorted by name, names unique) with `others` (names
    /// unique) over them.
    pub(super) fn of(
        packed: Arc<Vec<(String, String)>>,
        mut others: Vec<(String, String)>,
    ) -> RefListing {
        others.sort();
        debug_assert!(others.windows(2).all(|w| w[0].0 < w[1].0), "names unique");
        debug_assert!(packed.windows(2).all(|w| w[0].0 < w[1].0), "sorted, unique");
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
            packed: self.packed.as_slice(),
            others: self.others.as_slice(),
        }
    }

    /// What the ref `name` holds, if it is listed.
    pub fn get(&self, name: &str) -> Option<&str> {
        fn find<'a>(refs: &'a [(String, String)], name: &str) -> Option<&'a str> {
            refs.binary_search_by(|(n, _)| n.as_str().cmp(name))
                .ok()
                .map(|i| refs[i].1.as_str())
        }
        find(&self.others, name).or_else(|| find(&self.packed, name))
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
        Arc::ptr_eq(&self.packed, &other.packed) && !self.packed.is_empty()
    }

    /// Is nothing listed?
    pub fn is_empty(&self) -> bool {
        self.packed.is_empty() && self.others.is_empty()
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
    packed: &'a [(String, String)],
    others: &'a [(String, String)],
}

impl<'a> Iterator for Merged<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<(&'a str, &'a str)> {
        let take = |list: &mut &'a [(String, String)]| {
            let ((n, v), rest) = list.split_first()?;
            *list = rest;
            Some((n.as_str(), v.as_str()))
        };
        match (self.packed.first(), self.others.first()) {
            (Some((p, _)), Some((o, _))) => match p.cmp(o) {
                Ordering::Less => take(&mut self.packed),
                Ordering::Greater => take(&mut self.others),
                Ordering::Equal => {
                    self.packed = &self.packed[1..];
                    take(&mut self.others)
                }
            },
            (Some(_), None) => take(&mut self.packed),
            (None, _) => take(&mut self.others),
        }
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
        let packed = Arc::new(pairs(&[("refs/a/1", "p1"), ("refs/a/3", "p3")]));
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
