//! PFADD, PFCOUNT and PFMERGE: HyperLogLog sketches stored as strings in Redis's own byte
//! format (see `sketch.rs`), with Redis 7.0's replies and its errors.
//!
//! One difference, by the rule that a command which fails changes nothing: PFADD of several
//! elements to a damaged sparse sketch answers INVALIDOBJ and leaves the key as it was,
//! where Redis keeps in memory the registers it had raised before it found the damage.

use tailstore_resp::Reply;

use super::sketch::{self, Corrupt, NotSketch, REGISTERS};
use super::{Ctx, Fault, Outcome};
use crate::keyspace::notifications;

const NOT_SKETCH: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
const CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";

impl From<NotSketch> for Fault {
    fn from(_: NotSketch) -> Fault {
        Fault::err(NOT_SKETCH)
    }
}

impl From<Corrupt> for Fault {
    fn from(_: Corrupt) -> Fault {
        Fault::err(CORRUPT)
    }
}

/// PFADD key [element …]: 1 if the key was created or a register grew, else 0.
pub fn pfadd(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let key = &args[1];
    let (stored, row) = ctx.string_and_row(key)?;
    let (mut sketch, mut changed) = match &stored {
        Some(bytes) => {
            sketch::check(bytes)?;
            (bytes.clone(), false)
        }
        None => (sketch::empty(), true),
    };
    for element in &args[2..] {
        changed |= sketch::add(&mut sketch, element)?;
    }
    if changed {
        sketch::mark_stale(&mut sketch);
        ctx.put_string_changes(key, row, stored.as_deref(), &sketch)?;
        ctx.notify(notifications::STRING, "pfadd", key);
    }
    Ok(Reply::Int(i64::from(changed)))
}

/// PFCOUNT key [key …]: the estimated number of distinct elements added to the keys
/// together. One key's count is cached in its sketch, as Redis does: computed once after a
/// change and written back (a read that writes, so the reply waits for that write to be
/// durable like any other).
pub fn pfcount(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    if args.len() > 2 {
        let registers = merged_registers(ctx, &args[1..])?.0;
        return Ok(count_reply(sketch::count_registers(&registers)));
    }
    let key = &args[1];
    let (stored, row) = ctx.read_string_and_row(key)?;
    let Some(mut bytes) = stored else {
        return Ok(Reply::Int(0));
    };
    sketch::check(&bytes)?;
    if let Some(count) = sketch::cached(&bytes) {
        return Ok(count_reply(count));
    }
    let count = sketch::count(&bytes)?;
    let stale = bytes.clone();
    sketch::set_cache(&mut bytes, count);
    ctx.put_string_changes(key, row, Some(&stale), &bytes)?;
    Ok(count_reply(count))
}

/// PFMERGE destkey [sourcekey …]: the destination (itself one of the sources) holds the
/// largest of each register; dense if any source was, and its cached count stale.
pub fn pfmerge(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let (registers, any_dense) = merged_registers(ctx, &args[1..])?;
    let key = &args[1];
    let (stored, row) = ctx.string_and_row(key)?;
    // Checked as a source already: a sketch, or absent.
    let mut sketch = stored.clone().unwrap_or_else(sketch::empty);
    if any_dense {
        sketch::to_dense(&mut sketch)?;
    }
    for (index, &value) in registers.iter().enumerate() {
        if value != 0 {
            sketch::set_register(&mut sketch, index, value)?;
        }
    }
    sketch::mark_stale(&mut sketch);
    ctx.put_string_changes(key, row, stored.as_deref(), &sketch)?;
    ctx.notify(notifications::STRING, "pfadd", key);
    Ok(Reply::ok())
}

/// The largest of each register over the sketches at `keys` (absent keys count as empty),
/// and whether any of them is dense.
fn merged_registers(ctx: &mut Ctx, keys: &[Vec<u8>]) -> Result<(Vec<u8>, bool), Fault> {
    let mut registers = vec![0; REGISTERS];
    let mut any_dense = false;
    for key in keys {
        let Some(bytes) = ctx.read_string(key)? else {
            continue;
        };
        sketch::check(&bytes)?;
        any_dense |= sketch::is_dense(&bytes);
        sketch::merge_into(&mut registers, &bytes)?;
    }
    Ok((registers, any_dense))
}

/// Redis replies with the count as a signed 64-bit integer.
fn count_reply(count: u64) -> Reply {
    Reply::Int(count as i64)
}
