//! A configuration of knobs (name -> value) as the knobs optimizer holds thousands of them:
//! one sorted vector of pairs, each name shared with every other configuration that has it
//! (interned once per process). The knobs proposer keeps a configuration per experiment of
//! the run; as a map of owned names (a B-tree node per configuration, whatever the number of
//! knobs, and a string per name) one took about 540 bytes for three knobs, held here in
//! about 130. Reads like the map it replaces: names in order, one value each.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::KnobValue;

/// Knob name -> value, in name order.
#[derive(Clone, Default, PartialEq)]
pub struct Config {
    /// Sorted by name, names unique.
    entries: Vec<(Arc<str>, KnobValue)>,
}

/// The names seen so far, each held once (a run has a few dozen).
static NAMES: Mutex<Option<HashSet<Arc<str>>>> = Mutex::new(None);

/// The shared copy of `name`.
fn intern(name: &str) -> Arc<str> {
    // A poisoned lock only loses the sharing: the name is then held on its own.
    let Ok(mut names) = NAMES.lock() else {
        return Arc::from(name);
    };
    let names = names.get_or_insert_with(HashSet::new);
    if let Some(shared) = names.get(name) {
        return Arc::clone(shared);
    }
    let shared: Arc<str> = Arc::from(name);
    names.insert(Arc::clone(&shared));
    shared
}

impl Config {
    /// An empty configuration.
    pub fn new() -> Config {
        Config::default()
    }

    fn find(&self, name: &str) -> Result<usize, usize> {
        self.entries.binary_search_by(|(n, _)| (**n).cmp(name))
    }

    /// Sets `name` to `value`; the value it had, if any.
    pub fn insert(&mut self, name: impl AsRef<str>, value: KnobValue) -> Option<KnobValue> {
        let name = name.as_ref();
        match self.find(name) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (intern(name), value));
                None
            }
        }
    }

    /// The value of `name`.
    pub fn get(&self, name: impl AsRef<str>) -> Option<&KnobValue> {
        let i = self.find(name.as_ref()).ok()?;
        Some(&self.entries[i].1)
    }

    /// Whether `name` has a value.
    pub fn contains_key(&self, name: impl AsRef<str>) -> bool {
        self.find(name.as_ref()).is_ok()
    }

    /// Takes `name` out; its value, if it had one.
    pub fn remove(&mut self, name: impl AsRef<str>) -> Option<KnobValue> {
        let i = self.find(name.as_ref()).ok()?;
        Some(self.entries.remove(i).1)
    }

    /// The value of `name`, set to `value` first if it has none.
    pub fn or_insert(&mut self, name: impl AsRef<str>, value: KnobValue) -> &mut KnobValue {
        let name = name.as_ref();
        let i = match self.find(name) {
            Ok(i) => i,
            Err(i) => {
                self.entries.insert(i, (intern(name), value));
                i
            }
        };
        &mut self.entries[i].1
    }

    /// (name, value) in name order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&str, &KnobValue)> + ExactSizeIterator {
        self.entries.iter().map(|(n, v)| (&**n, v))
    }

    /// The names, in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &str> + ExactSizeIterator {
        self.entries.iter().map(|(n, _)| &**n)
    }

    /// The values, in name order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &KnobValue> + ExactSizeIterator {
        self.entries.iter().map(|(_, v)| v)
    }

    /// How many knobs have a value.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none has.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl<K: AsRef<str>> FromIterator<(K, KnobValue)> for Config {
    /// As a map collects: a name given twice keeps its last value.
    fn from_iter<I: IntoIterator<Item = (K, KnobValue)>>(pairs: I) -> Config {
        let mut config = Config::new();
        config.extend(pairs);
        config.entries.shrink_to_fit();
        config
    }
}

impl<K: AsRef<str>> Extend<(K, KnobValue)> for Config {
    fn extend<I: IntoIterator<Item = (K, KnobValue)>>(&mut self, pairs: I) {
        let pairs = pairs.into_iter();
        self.entries.reserve(pairs.size_hint().0);
        for (name, value) in pairs {
            self.insert(name, value);
        }
    }
}

impl<K: AsRef<str>, const N: usize> From<[(K, KnobValue); N]> for Config {
    fn from(pairs: [(K, KnobValue); N]) -> Config {
        pairs.into_iter().collect()
    }
}

impl<'a> IntoIterator for &'a Config {
    type Item = (&'a str, &'a KnobValue);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (Arc<str>, KnobValue)>,
        fn(&'a (Arc<str>, KnobValue)) -> (&'a str, &'a KnobValue),
    >;

    fn into_iter(self) -> Self::IntoIter {
        fn pair(e: &(Arc<str>, KnobValue)) -> (&str, &KnobValue) {
            (&*e.0, &e.1)
        }
        self.entries.iter().map(pair)
    }
}

impl IntoIterator for Config {
    type Item = (String, KnobValue);
    type IntoIter = std::iter::Map<
        std::vec::IntoIter<(Arc<str>, KnobValue)>,
        fn((Arc<str>, KnobValue)) -> (String, KnobValue),
    >;

    fn into_iter(self) -> Self::IntoIter {
        fn owned((n, v): (Arc<str>, KnobValue)) -> (String, KnobValue) {
            (n.to_string(), v)
        }
        self.entries.into_iter().map(owned)
    }
}

impl std::ops::Index<&str> for Config {
    type Output = KnobValue;

    /// The value of `name`; panics where it has none, as a map's index does.
    fn index(&self, name: &str) -> &KnobValue {
        match self.get(name) {
            Some(v) => v,
            None => panic!("no knob {name} in the configuration"),
        }
    }
}

impl fmt::Debug for Config {
    /// As the map it replaces: `{"A": Int(3), "B": Float(0.5)}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for Config {
    /// A JSON object of the knobs, in name order.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Config {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Config, D::Error> {
        Ok(BTreeMap::<String, KnobValue>::deserialize(d)?
            .into_iter()
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_as_the_map_it_replaces() {
        let pairs = [
            ("LR", KnobValue::Float(0.5)),
            ("DEPTH", KnobValue::Int(3)),
            ("MODE", KnobValue::Str("x".into())),
            ("LR", KnobValue::Float(0.25)),
        ];
        let config: Config = pairs.iter().cloned().collect();
        let map: BTreeMap<&str, KnobValue> = pairs.iter().cloned().collect();
        assert_eq!(config.len(), 3);
        assert!(config.iter().eq(map.iter().map(|(k, v)| (*k, v))));
        assert_eq!(format!("{config:?}"), format!("{map:?}"));
        assert_eq!(
            serde_json::to_string(&config).expect("serializes"),
            serde_json::to_string(&map).expect("serializes")
        );
        let back: Config =
            serde_json::from_str(r#"{"MODE":"x","DEPTH":3,"LR":0.25}"#).expect("reads");
        assert_eq!(back, config);
        assert_eq!(config["LR"], KnobValue::Float(0.25));
        assert_eq!(config.get("NONE"), None);
        let mut changed = config.clone();
        assert_eq!(
            changed.insert("DEPTH", KnobValue::Int(4)),
            Some(KnobValue::Int(3))
        );
        assert_ne!(changed, config);
        assert_eq!(changed.remove("MODE"), Some(KnobValue::Str("x".into())));
        assert_eq!(changed.keys().collect::<Vec<_>>(), ["DEPTH", "LR"]);
        *changed.or_insert("A", KnobValue::Bool(true)) = KnobValue::Bool(false);
        assert_eq!(changed.keys().next(), Some("A"));
        assert_eq!(changed.get("A"), Some(&KnobValue::Bool(false)));
    }

    #[test]
    fn a_name_is_held_once_for_every_configuration() {
        let a: Config = [("SHARED_NAME", KnobValue::Int(1))].into();
        let b: Config = [(String::from("SHARED_NAME"), KnobValue::Int(2))].into();
        assert!(Arc::ptr_eq(&a.entries[0].0, &b.entries[0].0));
        // Three knobs in one allocation of their pairs: no node of a map, no string per name.
        assert!(std::mem::size_of::<(Arc<str>, KnobValue)>() <= 40);
    }
}
