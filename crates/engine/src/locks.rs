//! Commit-time key locks of one B+tree.
//!
//! A committing transaction locks every key it writes (in a global order, waiting only
//! briefly: a key another transaction keeps locked aborts it), validates its reads, applies
//! its writes and unlocks. Readers never lock; validation checks that no key it read, and no
//! key in a range it scanned, is locked by another transaction that changes what it read.
//! Keys are held in an ordered map so that the range check is one `range` query.

use std::collections::BTreeMap;
use std::ops::Bound;

use parking_lot::Mutex;

use crate::patch::ColumnMask;

/// A lock: its owner (a transaction id) and the columns the owner changes.
#[derive(Clone, Copy)]
struct Holder {
    owner: u64,
    changes: ColumnMask,
}

/// The locked keys of one tree and their holders.
#[derive(Default)]
pub struct LockTable {
    keys: Mutex<BTreeMap<Vec<u8>, Holder>>,
}

impl LockTable {
    /// Locks `key` for `owner`, who changes the columns in `changes`; `false` if another
    /// transaction holds it (locks are exclusive whatever the columns).
    pub fn try_lock(&self, key: &[u8], owner: u64, changes: ColumnMask) -> bool {
        let mut keys = self.keys.lock();
        match keys.get(key) {
            Some(holder) => holder.owner == owner,
            None => {
                keys.insert(key.to_vec(), Holder { owner, changes });
                true
            }
        }
    }

    /// Releases `key` if `owner` holds it.
    pub fn unlock(&self, key: &[u8], owner: u64) {
        let mut keys = self.keys.lock();
        if keys.get(key).is_some_and(|holder| holder.owner == owner) {
            keys.remove(key);
        }
    }

    /// Whether a transaction other than `owner` holds `key` and changes a column in `read`.
    pub fn locked_by_other(&self, key: &[u8], owner: u64, read: ColumnMask) -> bool {
        self.keys
            .lock()
            .get(key)
            .is_some_and(|holder| holder.owner != owner && holder.changes.overlaps(read))
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
            .any(|(_, holder)| holder.owner != owner)
    }
}
