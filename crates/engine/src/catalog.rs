//! The catalog: the tables, their schemas and the root pages of their B+trees.
//!
//! Every table has one B+tree for its rows (keyed by the primary key) and one per secondary
//! index (keyed by index columns + primary key, empty values). Roots never move (see the
//! B+tree), so a table's trees are fixed when it is created, and the catalog changes only
//! when a table is created. It is stored as JSON in the meta pages at each checkpoint and in
//! the log record of each `create_table`, from which recovery rebuilds it.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tailstore_storage::{BTree, BufferPool, Column, IndexDef, PageId, Schema};

use crate::error::{EngineError, Result};
use crate::locks::LockTable;

/// A table's definition as stored.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TableDef {
    pub id: u32,
    pub name: String,
    pub columns: Vec<Column>,
    pub primary_key: Vec<usize>,
    pub indexes: Vec<IndexDef>,
    /// Root pages: the rows' tree, then one per index.
    pub roots: Vec<u64>,
}

#[derive(Serialize, Deserialize, Default)]
struct Stored {
    tables: Vec<TableDef>,
}

/// One B+tree of a table, with the locks of the keys being committed in it.
pub struct Tree {
    /// Unique over the database: commits latch trees in this order.
    pub id: u32,
    pub btree: BTree,
    pub locks: LockTable,
}

/// A table in memory.
pub struct TableState {
    pub def: TableDef,
    pub schema: Schema,
    /// `trees[0]` holds the rows; `trees[1 + i]` is index `i`.
    pub trees: Vec<Tree>,
}

impl TableState {
    /// Opens the trees of `def` (their roots must exist in `pool`).
    pub fn open(def: TableDef, pool: &Arc<BufferPool>) -> Result<TableState> {
        let schema = Schema::new(
            def.columns.clone(),
            def.primary_key.clone(),
            def.indexes.clone(),
        )?;
        if def.roots.len() != 1 + def.indexes.len() {
            return Err(EngineError::Corrupt(format!(
                "table `{}` lists {} roots for {} indexes",
                def.name,
                def.roots.len(),
                def.indexes.len()
            )));
        }
        let trees = def
            .roots
            .iter()
            .enumerate()
            .map(|(i, &root)| {
                Ok(Tree {
                    id: def.id * 64 + i as u32,
                    btree: BTree::open(pool.clone(), PageId(root))?,
                    locks: LockTable::default(),
                })
            })
            .collect::<Result<_>>()?;
        Ok(TableState { def, schema, trees })
    }

    pub fn name(&self) -> &str {
        &self.def.name
    }
}

/// Most indexes a table may have (tree ids leave room for 63).
pub const MAX_INDEXES: usize = 63;

/// All tables, by name.
#[derive(Default)]
pub struct Catalog {
    tables: Vec<Arc<TableState>>,
    by_name: HashMap<String, usize>,
}

impl Catalog {
    pub fn get(&self, name: &str) -> Option<&Arc<TableState>> {
        self.by_name.get(name).map(|&i| &self.tables[i])
    }

    pub fn tables(&self) -> &[Arc<TableState>] {
        &self.tables
    }

    pub fn next_id(&self) -> u32 {
        self.tables.iter().map(|t| t.def.id + 1).max().unwrap_or(1)
    }

    pub fn add(&mut self, table: TableState) {
        self.by_name
            .insert(table.def.name.clone(), self.tables.len());
        self.tables.push(Arc::new(table));
    }

    /// The catalog as stored in the meta pages.
    pub fn encode(&self) -> Vec<u8> {
        let stored = Stored {
            tables: self.tables.iter().map(|t| t.def.clone()).collect(),
        };
        serde_json::to_vec(&stored).unwrap_or_default()
    }

    /// The table definitions stored by [`Catalog::encode`]. Nothing is read from the data
    /// file: recovery must redo the log before the trees are opened (a root page torn by a
    /// crash is only rebuilt by redo, from its image in the log).
    pub fn decode_defs(bytes: &[u8]) -> Result<Vec<TableDef>> {
        let stored: Stored = if bytes.is_empty() {
            Stored::default()
        } else {
            serde_json::from_slice(bytes)
                .map_err(|e| EngineError::Corrupt(format!("catalog: {e}")))?
        };
        Ok(stored.tables)
    }

    /// Opens the trees of every table in `defs`, in order.
    pub fn open(defs: Vec<TableDef>, pool: &Arc<BufferPool>) -> Result<Catalog> {
        let mut catalog = Catalog::default();
        for def in defs {
            catalog.add(TableState::open(def, pool)?);
        }
        Ok(catalog)
    }
}

/// Encodes a table definition for the log.
pub fn encode_def(def: &TableDef) -> Vec<u8> {
    serde_json::to_vec(def).unwrap_or_default()
}

pub fn decode_def(bytes: &[u8]) -> Result<TableDef> {
    serde_json::from_slice(bytes)
        .map_err(|e| EngineError::Corrupt(format!("table definition in the log: {e}")))
}
