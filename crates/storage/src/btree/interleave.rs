//! Named points inside B+tree reads and writes where a unit test can make a thread pause at
//! random (`tailstore_history::pauses`), so that readers meet writers inside the narrow
//! windows of a structure change far more often than scheduling alone would make them.
//! Outside tests, [`reached`] is an empty inline function.

/// A place inside a read or a write of the tree.
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
}

impl Point {
    #[cfg(test)]
    fn name(self) -> &'static str {
        match self {
            Point::WalkBetweenNodes => "btree: walk between nodes",
            Point::LeafBeforeValidation => "btree: leaf before validation",
            Point::ChildSplitBeforeLink => "btree: child split before link",
            Point::MergeDecided => "btree: merge decided",
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
