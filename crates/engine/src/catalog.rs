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

impl TableDef {
    /// Table `name` of `schema`, numbered `id`, its trees rooted at `roots`.
    pub fn new(id: u32, name: &str, schema: &Schema, roots: Vec<u64>) -> TableDef {
        TableDef {
            id,
            name: name.to_string(),
            columns: schema.columns().to_vec(),
            primary_key: schema.primary_key().to_vec(),
            indexes: schema.indexes().to_vec(),
            roots,
        }
    }
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
    /// The end of the newest `CreateTable` record of a table added since the open (0: none).
    /// A table is added once its record is appended, before the record is durable: a
    /// checkpoint that stores the catalog makes the log durable to here first, or a crash
    /// could leave a meta page naming a table whose root the log no longer rebuilds.
    logged_to: u64,
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

    /// Adds a table that `create_table` logged in a record ending at `end`.
    pub fn add_logged(&mut self, table: TableState, end: u64) {
        self.add(table);
        self.logged_to = self.logged_to.max(end);
    }

    /// The catalog as stored in the meta pages, and the log position that must be durable
    /// before it is (see `logged_to`).
    pub fn snapshot(&self) -> (Vec<u8>, u64) {
        (self.encode(), self.logged_to)
    }

    /// The catalog as stored in the meta pages.
    pub fn encode(&self) -> Vec<u8> {
        self.encode_with(None)
    }

    /// The catalog with `def` added, as stored in the meta pages.
    pub fn encode_with(&self, def: Option<&TableDef>) -> Vec<u8> {
        let stored = Stored {
            tables: self
                .tables
                .iter()
                .map(|t| &t.def)
                .chain(def)
                .cloned()
                .collect(),
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

#[cfg(test)]
mod tests {
    //! The catalog in the meta pages across checkpoints and crashes, and the meta page's
    //! tie to its log.

    use std::path::PathBuf;
    use std::sync::Arc;
    use std::time::Duration;

    use tailstore_log::CommitMode;
    use tailstore_media::scaled_growth::ScaledGrowth;
    use tailstore_media::sim::SimStorage;
    use tailstore_storage::{Column, ColumnType, Schema, Value, PAGE_SIZE};

    use crate::interleave::{self, Point};
    use crate::{Database, DbConfig, EngineError};

    fn config(mode: CommitMode) -> DbConfig {
        let mut config = DbConfig::new("/db", mode, Some(PathBuf::from("/pmem")));
        config.buffer_pool_bytes = 64 * PAGE_SIZE;
        config.checkpoint_interval = None;
        config.log.block_bytes = 4 * 1024;
        config.log.ring_bytes = 512 * 1024;
        // `async`: nothing reaches the log file unless something forces it.
        config.log.async_interval = Duration::from_secs(3600);
        config
    }

    fn open(storage: &SimStorage, config: &DbConfig) -> crate::Result<Database> {
        Database::open_with(Arc::new(ScaledGrowth(storage.clone())), config.clone())
            .map(|(db, _)| db)
    }

    fn schema(columns: usize) -> Schema {
        let columns = (0..columns)
            .map(|i| Column::new(format!("a_column_with_a_long_name_{i}"), ColumnType::Int64))
            .collect();
        Schema::new(columns, vec![0], vec![]).expect("schema")
    }

    /// A database on new storage with table `rows` holding one committed row.
    fn with_a_row(config: &DbConfig) -> (SimStorage, Database) {
        let storage = SimStorage::new();
        let db = open(&storage, config).expect("create");
        let table = db.create_table("rows", &schema(1)).expect("table");
        let mut txn = db.begin();
        txn.insert(&table, &[Value::Int(7)]).expect("insert");
        txn.commit().expect("commit");
        (storage, db)
    }

    #[test]
    fn a_table_created_while_a_checkpoint_runs_survives_a_crash() {
        // The checkpoint reads the catalog after it made the log durable up to where redo
        // will start: a table created in between is in the meta page while its record may
        // not be durable yet.
        let config = config(CommitMode::Async);
        let storage = SimStorage::new();
        let db = Arc::new(open(&storage, &config).expect("create"));
        db.create_table("early", &schema(1)).expect("early");
        let creator = db.clone();
        interleave::at(Point::CheckpointFlushed, move || {
            creator.create_table("late", &schema(1)).expect("late");
        });
        db.checkpoint().expect("checkpoint");
        assert!(db.table("late").is_ok(), "the hook did not run");
        let image = storage.process_crash();
        storage.crash_after(0);
        drop(db);
        let db = open(&image, &config)
            .unwrap_or_else(|e| panic!("the database must open after the crash: {e}"));
        for name in ["early", "late"] {
            let table = db.table(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            let mut txn = db.begin();
            txn.insert(&table, &[Value::Int(1)]).expect("insert");
            txn.commit().expect("commit");
        }
        db.check().expect("check");
    }

    #[test]
    fn a_table_the_catalog_has_no_room_for_is_refused() {
        let config = config(CommitMode::Fsync);
        let storage = SimStorage::new();
        let db = open(&storage, &config).expect("create");
        let refused =
            (0..1000).find_map(
                |i| match db.create_table(&format!("wide_{i}"), &schema(200)) {
                    Ok(_) => None,
                    Err(err) => Some((i, err)),
                },
            );
        let Some((created, EngineError::CatalogFull { .. })) = refused else {
            panic!("expected the catalog to fill up: {refused:?}");
        };
        assert!(created > 0, "the first table fits");
        // What was created still checkpoints, closes and opens.
        db.checkpoint().expect("checkpoint");
        db.close().expect("close");
        let db = open(&storage, &config).expect("reopen");
        assert!(db.table(&format!("wide_{}", created - 1)).is_ok());
        db.checkpoint().expect("checkpoint after the reopen");
    }

    #[test]
    fn a_data_file_whose_log_is_missing_is_refused_before_its_first_checkpoint() {
        // Nothing checkpointed: the table and the row are only in the log.
        let config = config(CommitMode::Fsync);
        let (storage, db) = with_a_row(&config);
        let image = storage.process_crash();
        storage.crash_after(0);
        drop(db);
        let mut elsewhere = config.clone();
        elsewhere.log.log_dir = PathBuf::from("/another-log");
        match open(&image, &elsewhere) {
            Err(EngineError::Open(why)) => assert!(why.contains("is missing"), "{why}"),
            Err(other) => panic!("refused for another reason: {other}"),
            Ok(db) => panic!(
                "opened without its log, holding {:?}",
                db.table("rows").map(|_| "the table")
            ),
        }
    }

    #[test]
    fn a_data_file_is_refused_beside_the_log_of_another_database() {
        // Two databases that did the same work: their logs have the same shape.
        let config = config(CommitMode::Fsync);
        let (mine, db) = with_a_row(&config);
        db.close().expect("close");
        let (theirs, db) = with_a_row(&config);
        db.close().expect("close");
        let log = config.log.log_file();
        mine.set_file_bytes(&log, theirs.file_bytes(&log).expect("their log"));
        match open(&mine, &config) {
            Err(EngineError::Open(why)) => {
                assert!(why.contains("belongs to database"), "{why}")
            }
            Err(other) => panic!("refused for another reason: {other}"),
            Ok(_) => panic!("opened with another database's log"),
        }
    }
}
