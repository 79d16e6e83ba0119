//! Named points inside B+tree reads and writes and the buffer pool's lookups where a unit test
//! can make a thread pause at random (`tailstore_history::pauses`), so that readers meet
//! writers inside the narrow windows of a structure change, and lookups meet evictions, far
//! more often than scheduling alone would make them. Outside tests, [`reached`] is an empty
//! inline function.

/// A place inside a read or a write of the tree, or a lookup in the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Point {
    /// A latch-free walk has read an inner node and is about to read the next node.
    WalkBetweenNodes,
    /// An optimistic read holds its leaf and has yet to validate the walk that reached it.
    LeafBeforeValidation,
    /// A writer has split a child and not yet linked the new sibling into the parent.
    ChildSplitBeforeLink,
    /// A writer has decided on a merge (under shared latches) and not yet latched the pages.
    MergeDecided,
    /// A writer found its first key's leaf without the tree latch and has yet to take it.
    WriterPathBeforeLatch,
    /// A lookup found a page's frame through its hint and has yet to latch the frame.
    HintBeforeLatch,
    /// A lookup pinned a page's frame and has yet to latch it.
    PinnedBeforeLatch,
    /// A miss claimed a victim frame and has yet to map the page to it.
    VictimClaimed,
}

impl Point {
    #[cfg(test)]
    fn name(self) -> &'static str {
        match self {
            Point::WalkBetweenNodes => "btree: walk between nodes",
            Point::LeafBeforeValidation => "btree: leaf before validation",
            Point::ChildSplitBeforeLink => "btree: child split before link",
            Point::MergeDecided => "btree: merge decided",
            Point::WriterPathBeforeLatch => "btree: writer's path before the latch",
            Point::HintBeforeLatch => "pool: hint before latch",
            Point::PinnedBeforeLatch => "pool: pinned before latch",
            Point::VictimClaimed => "pool: victim claimed",
        }
    }
}

#[cfg(not(test))]
#[inline(always)]
pub(crate) fn reached(_point: Point) {}

#[cfg(test)]
pub(crate) fn reached(point: Point) {
    tailstore_history::pauses::reached(point.name());
}
