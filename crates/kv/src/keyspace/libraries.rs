//! Function libraries' code, stored durably (FUNCTION LOAD, DELETE, FLUSH, RESTORE).
//!
//! Each library's code is a value in `kv_parts` under a reserved owner, [`LIBRARIES`],
//! its field the library's name: cut into parts as any value, written in the transaction
//! of the command that loads it, so a library is durable before FUNCTION LOAD answers
//! and a crash leaves it whole or absent. Key ids are never negative
//! (`Keyspace::new_version`), so no key's elements share the owner, and nothing that
//! walks keys (SCAN, FLUSHALL, the lazy free) reaches it: FLUSHALL keeps the libraries,
//! as Redis's does.

use tailstore_engine::Transaction;
use tailstore_storage::ScanDirection;

use super::parts::{FieldValues, MAX_FIELD};
use super::Keyspace;
use crate::command::Fault;

/// The owner of the libraries' rows.
const LIBRARIES: i64 = -1;

/// The longest library name stored: a field of `kv_parts`.
pub const MAX_LIBRARY_NAME: usize = MAX_FIELD;

impl Keyspace {
    /// Every stored library: its name and its code, in name order.
    pub(crate) fn stored_libraries(&self, txn: &mut Transaction<'_>) -> Result<FieldValues, Fault> {
        self.fields(txn, LIBRARIES, ScanDirection::Ascending, usize::MAX)
    }

    /// Stores the library `name`'s `code`, replacing the one of that name if any.
    pub(crate) fn store_library(
        &self,
        txn: &mut Transaction<'_>,
        name: &[u8],
        code: &[u8],
    ) -> Result<(), Fault> {
        debug_assert!(name.len() <= MAX_LIBRARY_NAME);
        let old = self.value_len(txn, LIBRARIES, name)?;
        self.write_value(txn, LIBRARIES, name, code, old)
    }

    /// Removes the library `name`; whether it was stored.
    pub(crate) fn remove_library(
        &self,
        txn: &mut Transaction<'_>,
        name: &[u8],
    ) -> Result<bool, Fault> {
        self.delete_value(txn, LIBRARIES, name)
    }
}
