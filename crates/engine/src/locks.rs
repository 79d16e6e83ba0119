//! Commit-time key locks of one B+tree.
//!
//! A committing transaction locks every key it writes (in a global order, without waiting:
//! a key already locked by another transaction aborts it), validates its reads, applies its
//! writes and unlocks. Readers never lock; validation checks that no key it read, and no key
//! in a range it scanned, is locked by another transaction. Keys are held in an ordered map
//! so that the range check is one `range` query.

use std::collections::BTreeMap;
use std::ops::Bound;

use parking_lot::Mutex;

/// The locked keys of one tree and their owners (transaction ids).
#[derive(Default)]
pub struct LockTable {
    keys: Mutex<BTreeMap<Vec<u8>, u64>>,
}

impl LockTable {
    /// Locks `key` for `owner`; `false` if another transaction holds it.
    pub fn try_lock(&self, key: &[u8], owner: u64) -> bool {
        let mut keys = self.keys.lock();
        match keys.get(key) {
            Some(&holder) => holder == owner,
            None => {
                keys.insert(key.to_vec(), owner);
                true
            }
        }
    }

    /// Releases `key` if `owner` holds it.
    pub fn unlock(&self, key: &[u8], owner: u64) {
        let mut keys = self.keys.lock();
        if keys.get(key) == Some(&owner) {
            keys.remove(key);
        }
    }

    /// Whether a transaction other than `owner` holds `key`.
    pub fn locked_by_other(&self, key: &[u8], owner: u64) -> bool {
        self.keys
            .lock()
            .get(key)
            .is_some_and(|&holder| holder != owner)
    }

    /// Whether a transaction other than `owner` holds a key in `(lower, upper)`.
    pub fn range_locked_by_other(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        owner: u64,
    ) -> bool {
        // `BTreeMap::range` panics on an inverted or empty-exclusive range: those hold no key.
        match (lower, upper) {
            (Bound::Included(l), Bound::Included(u)) if l > u => return false,
            (Bound::Included(l) | Bound::Excluded(l), Bound::Included(u) | Bound::Excluded(u))
                if l >= u
                    && !matches!((lower, upper), (Bound::Included(_), Bound::Included(_))) =>
            {
                return false
            }
            _ => {}
        }
        self.keys
            .lock()
            .range::<[u8], _>((lower, upper))
            .any(|(_, &holder)| holder != owner)
    }
}
