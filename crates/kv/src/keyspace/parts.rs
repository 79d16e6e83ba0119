//! Values of any size, cut into parts that each fit a B+tree entry.
//!
//! A value is stored under (owner, field) as rows `part = 0, 1, …`, where the owner is the
//! id of the key's incarnation (`KeyMeta::id`); each part row also holds the value's length
//! when the row was written, and part 0's is the value's length, so a reader knows when it
//! has every part (a growth in place rewrites part 0, not every part: decision 235). A
//! string's field is empty; a hash field's is the field name; a list element's is its
//! sequence number (order-preserving, see [`seq_field`]); a set member's is the member (with
//! an empty value).

use std::ops::ControlFlow;

use tailstore_engine::{KeyRange, Transaction};
use tailstore_storage::{ScanDirection, Value};

use super::meta::{bytes, int, take_bytes};
use super::Keyspace;
use crate::command::Fault;

/// The longest key we store. Keys are B+tree key columns, and a B+tree entry holds at most
/// [`tailstore_storage::MAX_ENTRY`] bytes; Redis allows longer keys, we answer them with an
/// error.
pub const MAX_KEY: usize = 512;
/// The longest hash field, set member or sorted-set member.
pub const MAX_FIELD: usize = 256;
/// Room left in an entry for the row's value header and the engine's version.
const ROW_OVERHEAD: usize = 64;

/// Columns of a `kv_parts` row: (owner, field, part) -> data, total.
const FIELD: usize = 1;
const PART: usize = 2;
pub(super) const DATA: usize = 3;
const TOTAL: usize = 4;

/// The length of the encoded primary key of a part row of `field`, counted rather than
/// encoded (every write and read of a value asks): two integers of 9 bytes each, and the
/// field with its tag, a 0xFF after each zero byte and a two-byte terminator (see
/// `tailstore_storage::key`; `part_key_len_is_the_encoded_length` holds the two together).
fn part_key_len(field: &[u8]) -> usize {
    let zeros = field.iter().filter(|&&b| b == 0).count();
    9 + (1 + field.len() + zeros + 2) + 9
}

/// The field of a list element with sequence number `seq`: big-endian with the sign bit
/// flipped, so that byte order is numeric order.
pub fn seq_field(seq: i64) -> Vec<u8> {
    ((seq as u64) ^ (1 << 63)).to_be_bytes().to_vec()
}

pub fn seq_of_field(field: &[u8]) -> Result<i64, Fault> {
    let array: [u8; 8] = field
        .try_into()
        .map_err(|_| Fault::corrupt("list element field is not 8 bytes".to_string()))?;
    Ok((u64::from_be_bytes(array) ^ (1 << 63)) as i64)
}

/// (field, value) pairs of a key, in field order.
pub(crate) type FieldValues = Vec<(Vec<u8>, Vec<u8>)>;

fn part_key(owner: i64, field: &[u8], part: i64) -> Vec<Value> {
    vec![
        Value::Int(owner),
        Value::Bytes(field.to_vec()),
        Value::Int(part),
    ]
}

/// Part `part` of a value of `total` bytes under (owner, field), holding `data`: every
/// part row carries the whole value's length.
fn part_row(owner: i64, field: &[u8], part: usize, data: &[u8], total: usize) -> [Value; 5] {
    [
        Value::Int(owner),
        Value::Bytes(field.to_vec()),
        Value::Int(part as i64),
        Value::Bytes(data.to_vec()),
        Value::Int(total as i64),
    ]
}

fn owner_prefix(owner: i64) -> Vec<Value> {
    vec![Value::Int(owner)]
}

/// Parts of one value read in one shared descent at most (~2 MB); the rest are read one by
/// one. Bounds what a damaged length in a key's row can make a read ask for at once.
const MAX_PARTS_AT_ONCE: usize = 1024;

/// Rows one batch of [`Keyspace::fields_range`] scans at most.
const MAX_BATCH_ROWS: usize = 1024;

/// Bytes of a value allocated before its parts are read, at most.
const PREALLOCATED: usize = 4 << 20;

fn parts_needed(total: usize, capacity: usize) -> usize {
    total.div_ceil(capacity).max(1)
}

impl Keyspace {
    /// How many value bytes one part row of (owner, field) holds in this store, whose part
    /// rows take at most `part_limit` bytes of key and value.
    pub(crate) fn part_capacity(&self, field: &[u8]) -> usize {
        self.part_limit
            .saturating_sub(part_key_len(field) + ROW_OVERHEAD)
            .max(1)
    }

    /// About the bytes a value of `len` bytes under `field` takes in `kv_parts`: its
    /// parts' keys, their bytes, and each entry's room for its header (MEMORY USAGE).
    pub(crate) fn stored_bytes(&self, field: &[u8], len: usize) -> usize {
        let parts = parts_needed(len, self.part_capacity(field)).max(1);
        parts * (part_key_len(field) + ROW_OVERHEAD) + len
    }

    /// Stores `value` under (owner, field), replacing a value of `old_total` bytes if
    /// there was one.
    pub(crate) fn write_value(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        field: &[u8],
        value: &[u8],
        old_total: Option<usize>,
    ) -> Result<(), Fault> {
        let capacity = self.part_capacity(field);
        let old_parts = old_total.map_or(0, |total| parts_needed(total, capacity));
        let new_parts = parts_needed(value.len(), capacity);
        self.write_value_parts(txn, owner, field, value, 0..new_parts)?;
        if old_parts > new_parts {
            let removed = old_total.map_or(0, |total| total.saturating_sub(new_parts * capacity));
            super::garbage::charge_removal(txn, removed)?;
        }
        for part in new_parts..old_parts {
            txn.remove(&self.parts, &part_key(owner, field, part as i64))?;
        }
        Ok(())
    }

    /// Writes parts `parts` of `value` under (owner, field): all of them for
    /// [`Keyspace::write_value`], a run of them for a string written in pieces whose other
    /// parts other transactions write (decision 148). Each part row carries the whole
    /// value's length, as [`part_data`] expects.
    pub(crate) fn write_value_parts(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        field: &[u8],
        value: &[u8],
        parts: std::ops::Range<usize>,
    ) -> Result<(), Fault> {
        let capacity = self.part_capacity(field);
        for part in parts {
            let start = (part * capacity).min(value.len());
            let data = &value[start..(start + capacity).min(value.len())];
            // A blind write: whether the part existed is the caller's knowledge.
            txn.put(
                &self.parts,
                &part_row(owner, field, part, data, value.len()),
            )?;
        }
        Ok(())
    }

    /// The value under (owner, field), if any. `expected_len` is the caller's guess of its
    /// length (a string's meta row holds it): the parts it implies are read together, in
    /// one B+tree descent when they share a leaf. Part 0's total decides; a wrong guess
    /// costs only reads.
    pub(crate) fn read_value(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        field: &[u8],
        expected_len: Option<usize>,
    ) -> Result<Option<Vec<u8>>, Fault> {
        let guessed = expected_len.map_or(1, |len| {
            parts_needed(len, self.part_capacity(field)).min(MAX_PARTS_AT_ONCE)
        });
        let keys: Vec<Vec<Value>> = (0..guessed)
            .map(|part| part_key(owner, field, part as i64))
            .collect();
        let mut rows = txn.get_many(&self.parts, &keys)?.into_iter();
        let Some(first) = rows.next().flatten() else {
            return Ok(None);
        };
        let total = usize::try_from(int(&first[TOTAL])?)
            .map_err(|_| Fault::corrupt("negative value length".to_string()))?;
        // Lengths are stored data: what one asks for is allocated as its parts arrive, not
        // before (a damaged total of 2^40 once aborted the process here).
        let mut value = Vec::with_capacity(total.min(PREALLOCATED));
        value.extend_from_slice(bytes(&first[DATA])?);
        let mut part = 1;
        while value.len() < total {
            let row = match rows.next() {
                Some(row) => row,
                None => txn.get(&self.parts, &part_key(owner, field, part))?,
            };
            let row = row.ok_or_else(|| Fault::corrupt(format!("value part {part} is missing")))?;
            value.extend_from_slice(bytes(&row[DATA])?);
            part += 1;
        }
        if value.len() != total {
            return Err(Fault::corrupt(
                "value parts longer than their total".to_string(),
            ));
        }
        Ok(Some(value))
    }

    /// The length of the value under (owner, field), if any, reading only its first part.
    pub(crate) fn value_len(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        field: &[u8],
    ) -> Result<Option<usize>, Fault> {
        let Some(first) = txn.get(&self.parts, &part_key(owner, field, 0))? else {
            return Ok(None);
        };
        Ok(Some(int(&first[TOTAL])?.max(0) as usize))
    }

    /// Calls `visit(offset, bytes)` with bytes `range` of the value under (owner, field),
    /// in order, a part at a time, until it breaks: a GETRANGE, GETBIT or BITCOUNT of a few
    /// bytes reads the parts that hold them (`range.start / capacity ..= (range.end - 1) /
    /// capacity`), in batched descents as [`Keyspace::read_value`]'s, and never holds a
    /// copy of the whole value. `total` is the value's length as its part 0 has it
    /// ([`Keyspace::value_len`]), which the caller read in the same transaction; a part
    /// that disagrees with it is a torn (or damaged) read.
    ///
    /// Why reading only these rows is as serializable as reading every part: what the
    /// caller answers depends on the key's meta row (read by its lookup), on part 0 (the
    /// length, hence the clamped range) and on these parts' bytes, and every write that
    /// could change it writes one of those rows. A new value under a new owner (SET of a
    /// long string, DEL, RESTORE…) writes the meta row; a write under the same owner that
    /// changes the length writes part 0 (and the meta row); one that keeps the length
    /// writes the parts whose bytes change, and if those are not among the rows read, the
    /// answer did not depend on them. Validation at commit then fails exactly when a row
    /// the answer depends on changed.
    pub(crate) fn visit_value_range(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        field: &[u8],
        total: usize,
        range: std::ops::Range<usize>,
        mut visit: impl FnMut(usize, &[u8]) -> ControlFlow<()>,
    ) -> Result<(), Fault> {
        let range = range.start..range.end.min(total);
        if range.is_empty() {
            return Ok(());
        }
        let capacity = self.part_capacity(field);
        let parts = range.start / capacity..(range.end - 1) / capacity + 1;
        let mut first = parts.start;
        while first < parts.end {
            let last = (first + MAX_PARTS_AT_ONCE).min(parts.end);
            let keys: Vec<Vec<Value>> = (first..last)
                .map(|part| part_key(owner, field, part as i64))
                .collect();
            let rows = txn.get_many(&self.parts, &keys)?;
            for (part, row) in (first..last).zip(rows) {
                let data = part_data(row, part, total, capacity)?;
                let start = part * capacity;
                // The bytes of this part inside the range.
                let from = range.start.max(start) - start;
                let to = range.end.min(start + data.len()) - start;
                if visit(start + from, &data[from..to]).is_break() {
                    return Ok(());
                }
            }
            first = last;
        }
        Ok(())
    }

    /// Bytes `range` of the value of `total` bytes under (owner, field), as
    /// [`Keyspace::visit_value_range`] reads them (the range is cut at the value's end).
    pub(crate) fn read_value_range(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        field: &[u8],
        total: usize,
        range: std::ops::Range<usize>,
    ) -> Result<Vec<u8>, Fault> {
        let mut out = Vec::with_capacity(range.len().min(total).min(PREALLOCATED));
        self.visit_value_range(txn, owner, field, total, range, |_, bytes| {
            out.extend_from_slice(bytes);
            ControlFlow::Continue(())
        })?;
        Ok(out)
    }

    /// Writes `patch` over the value of `total` bytes under (owner, field) at `offset`,
    /// zero-filling from the value's end to `offset` and growing it when the patch ends past
    /// it; the value's new length. Only the part rows that hold changed bytes are rewritten,
    /// and part 0 when the length changes: readers go by part 0's length, and a part row
    /// keeps the length the value had when the row was written ([`part_data`]). An APPEND to
    /// a long string so rewrites its last part and part 0, not the whole string.
    pub(crate) fn patch_value(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        field: &[u8],
        total: usize,
        offset: usize,
        patch: &[u8],
    ) -> Result<usize, Fault> {
        if patch.is_empty() {
            return Ok(total);
        }
        let end = offset
            .checked_add(patch.len())
            .ok_or_else(|| Fault::corrupt(format!("a patch at {offset} past any length")))?;
        let new_total = total.max(end);
        let capacity = self.part_capacity(field);
        // Whole parts, from the one holding the first changed byte (a zero of the gap, if the
        // patch starts past the end): the bytes of the first and last that the patch leaves
        // are kept.
        let start = offset.min(total) / capacity * capacity;
        let stop = end
            .div_ceil(capacity)
            .saturating_mul(capacity)
            .min(new_total);
        let kept = stop.min(total) - start;
        let mut parts = self.read_value_range(txn, owner, field, total, start..start + kept)?;
        if parts.len() != kept {
            return Err(Fault::corrupt(format!(
                "value parts {start}..{} hold {} bytes",
                start + kept,
                parts.len()
            )));
        }
        parts.resize(stop - start, 0);
        parts[offset - start..end - start].copy_from_slice(patch);
        let first_part = start / capacity;
        for (at, data) in parts.chunks(capacity).enumerate() {
            txn.put(
                &self.parts,
                &part_row(owner, field, first_part + at, data, new_total),
            )?;
        }
        if new_total != total && first_part > 0 {
            let head = self.read_value_range(txn, owner, field, total, 0..capacity)?;
            txn.put(&self.parts, &part_row(owner, field, 0, &head, new_total))?;
        }
        Ok(new_total)
    }

    /// Deletes the value under (owner, field); returns whether there was one.
    pub(crate) fn delete_value(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        field: &[u8],
    ) -> Result<bool, Fault> {
        let Some(total) = self.value_len(txn, owner, field)? else {
            return Ok(false);
        };
        self.remove_value(txn, owner, field, total)?;
        Ok(true)
    }

    /// Whether rewriting a key's string of `old_total` bytes as one of `new_total` would
    /// remove more part rows than a delete removes inline: the caller then frees the old
    /// string as a deleted key's (queued), so that a SET is never refused for its removals.
    pub(crate) fn shrinks_past_inline(&self, old_total: usize, new_total: usize) -> bool {
        let capacity = self.part_capacity(b"");
        parts_needed(old_total, capacity).saturating_sub(parts_needed(new_total, capacity))
            > super::garbage::INLINE_ROWS
    }

    /// Deletes the value of `total` bytes under (owner, field), known to be there.
    pub(crate) fn remove_value(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        field: &[u8],
        total: usize,
    ) -> Result<(), Fault> {
        super::garbage::charge_removal(txn, total)?;
        let capacity = self.part_capacity(field);
        for part in 0..parts_needed(total, capacity) {
            txn.remove(&self.parts, &part_key(owner, field, part as i64))?;
        }
        Ok(())
    }

    /// The fields at `positions` (strictly increasing) among `owner`'s, in field order, for
    /// a key whose every field is one part row (a set's members; a field with a value of
    /// several parts would count once per part). The rows before each position are passed
    /// over, not read (`Transaction::rows_at`, whose caveat holds: positions are not
    /// validated, the key's row must be read as well). A position past the last field finds
    /// none, so fewer fields may come back.
    pub(crate) fn fields_at(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        positions: &[usize],
    ) -> Result<Vec<Vec<u8>>, Fault> {
        let found = self.field_values_at(txn, owner, positions)?;
        Ok(found.into_iter().map(|(field, _)| field).collect())
    }

    /// [`Keyspace::fields_at`] with each field's value, which is the row's data: a row that
    /// is not a whole value (a part of a longer one) is refused as torn.
    pub(crate) fn field_values_at(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        positions: &[usize],
    ) -> Result<FieldValues, Fault> {
        let range = KeyRange::prefix(owner_prefix(owner));
        txn.rows_at(&self.parts, &range, positions)?
            .iter_mut()
            .map(|row| {
                let (field, data) = (take_bytes(&mut row[FIELD])?, take_bytes(&mut row[DATA])?);
                if int(&row[PART])? != 0 || int(&row[TOTAL])? != data.len() as i64 {
                    return Err(Fault::corrupt(format!(
                        "a value of {} bytes taken for a whole one",
                        data.len()
                    )));
                }
                Ok((field, data))
            })
            .collect()
    }

    /// How many part rows `owner`'s values take: as many as its fields when every value is
    /// one row. Counted a leaf at a time, not read (`Transaction::count`).
    pub(crate) fn part_rows(&self, txn: &mut Transaction<'_>, owner: i64) -> Result<usize, Fault> {
        let range = KeyRange::prefix(owner_prefix(owner));
        Ok(txn.count(&self.parts, &range)?)
    }

    /// Every (field, value) of a key, in field order (`limit` fields at most).
    pub(crate) fn fields(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        direction: ScanDirection,
        limit: usize,
    ) -> Result<FieldValues, Fault> {
        self.fields_in(txn, KeyRange::prefix(owner_prefix(owner)), direction, limit)
    }

    /// The (field, value) pairs of a key whose fields lie in `first..=last`, in field order:
    /// one range scan (a list's elements `i..=j` are the fields `seq_field(head + i)..`).
    pub(crate) fn fields_between(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        first: &[u8],
        last: &[u8],
    ) -> Result<FieldValues, Fault> {
        let range = fields_from_to(owner, first, last);
        self.fields_in(txn, range, ScanDirection::Ascending, usize::MAX)
    }

    /// Up to `limit` (field, value) pairs of a key whose fields lie in `first..=last`, from
    /// the `direction`'s end of the range, reading about as many rows as it returns (a
    /// stream's `XRANGE - + COUNT 1` must not read ten thousand entries). Rows are scanned in
    /// batches; a batch that ends inside a value's parts is resumed at that value.
    pub(crate) fn fields_range(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        first: &[u8],
        last: &[u8],
        direction: ScanDirection,
        limit: usize,
    ) -> Result<FieldValues, Fault> {
        let (mut first, mut last) = (first.to_vec(), last.to_vec());
        let mut out: FieldValues = Vec::new();
        let mut rows = limit.saturating_add(1).clamp(2, MAX_BATCH_ROWS);
        while out.len() < limit {
            let range = fields_from_to(owner, &first, &last);
            let (mut batch, scanned) = self.scan_fields(txn, range, direction, rows)?;
            let exhausted = scanned < rows;
            if !exhausted {
                // The batch's last value may have parts beyond it: read again from it.
                let cut = match batch.pop() {
                    Some((cut, _)) if !batch.is_empty() => cut,
                    // One value's parts fill the batch: a larger one.
                    _ => {
                        rows = rows.saturating_mul(2);
                        continue;
                    }
                };
                match direction {
                    ScanDirection::Ascending => first = cut,
                    ScanDirection::Descending => last = cut,
                }
            }
            batch.truncate(limit - out.len());
            out.extend(batch);
            if exhausted {
                break;
            }
            rows = (limit - out.len())
                .saturating_add(1)
                .clamp(2, MAX_BATCH_ROWS);
        }
        Ok(out)
    }

    /// The (field, value) pairs in the first `rows` rows of `range`, and how many rows
    /// were scanned.
    fn scan_fields(
        &self,
        txn: &mut Transaction<'_>,
        range: KeyRange,
        direction: ScanDirection,
        rows: usize,
    ) -> Result<(FieldValues, usize), Fault> {
        let mut out: FieldValues = Vec::new();
        let (mut torn, mut scanned) = (None, 0);
        let wanted = |column| column == FIELD || column == DATA;
        txn.scan_each(&self.parts, &range, direction, rows, wanted, |row| {
            scanned += 1;
            if torn.is_none() {
                torn = add_part(&mut out, row, direction, usize::MAX).err();
            }
            Ok(())
        })?;
        torn.map_or(Ok((out, scanned)), Err)
    }

    fn fields_in(
        &self,
        txn: &mut Transaction<'_>,
        range: KeyRange,
        direction: ScanDirection,
        limit: usize,
    ) -> Result<FieldValues, Fault> {
        let mut out: FieldValues = Vec::new();
        let mut torn = None;
        let wanted = |column| column == FIELD || column == DATA;
        txn.scan_each(&self.parts, &range, direction, usize::MAX, wanted, |row| {
            if torn.is_none() {
                torn = add_part(&mut out, row, direction, limit).err();
            }
            Ok(())
        })?;
        torn.map_or(Ok(out), Err)
    }
}

/// The bytes of part `part` of a value of `total` bytes cut `capacity` a part, from its
/// row; a missing row, or one whose length or bytes do not fit that value, is torn. A row
/// holds the value's length when the row was written: the current length, or (for a
/// full part that a growth left as it was, [`Keyspace::patch_value`]) a shorter one that
/// still reaches past the part's bytes.
fn part_data(
    row: Option<Vec<Value>>,
    part: usize,
    total: usize,
    capacity: usize,
) -> Result<Vec<u8>, Fault> {
    let mut row = row.ok_or_else(|| Fault::corrupt(format!("value part {part} is missing")))?;
    let expected = total.saturating_sub(part * capacity).min(capacity);
    let data = take_bytes(&mut row[DATA])?;
    let written_at = int(&row[TOTAL])?;
    let reached = (part * capacity + data.len()) as i64;
    if data.len() != expected || written_at > total as i64 || written_at < reached {
        return Err(Fault::corrupt(format!(
            "value part {part} does not fit a value of {total} bytes"
        )));
    }
    Ok(data)
}

/// The part rows of `owner`'s values whose fields lie in `first..=last`.
fn fields_from_to(owner: i64, first: &[u8], last: &[u8]) -> KeyRange {
    let bound = |field: &[u8]| vec![Value::Int(owner), Value::Bytes(field.to_vec())];
    KeyRange::new(
        std::ops::Bound::Included(bound(first)),
        std::ops::Bound::Included(bound(last)),
    )
}

/// Adds a scanned part row to `out`: to the last value if the row is of the same field,
/// else as the next (field, value) pair, unless `out` already holds `limit` of them. The
/// bytes are moved out of the row (the scan reuses it for the next one).
fn add_part(
    out: &mut FieldValues,
    row: &mut [Value],
    direction: ScanDirection,
    limit: usize,
) -> Result<(), Fault> {
    let data = take_bytes(&mut row[DATA])?;
    let field = bytes(&row[FIELD])?;
    if let Some((_, value)) = out.last_mut().filter(|(last, _)| last.as_slice() == field) {
        match direction {
            ScanDirection::Ascending => value.extend_from_slice(&data),
            ScanDirection::Descending => value.splice(0..0, data).for_each(drop),
        }
    } else if out.len() < limit {
        out.push((take_bytes(&mut row[FIELD])?, data));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailstore_storage::key::encode_tuple;

    #[test]
    fn part_key_len_is_the_encoded_length() {
        let fields: [&[u8]; 5] = [b"", b"f", b"\0", b"a\0b\0\0", &[0xFF; 256]];
        for field in fields {
            for (owner, part) in [(0, 0), (-1, 7), (i64::MAX, i64::MIN)] {
                let encoded = encode_tuple(&part_key(owner, field, part));
                assert_eq!(part_key_len(field), encoded.len(), "field {field:?}");
            }
        }
    }
}
