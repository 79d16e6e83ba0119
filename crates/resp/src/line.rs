//! Finding where a line ends, within a bounded window.
//!
//! The search never looks further than `max + 1` bytes past the line's start, so whether a line
//! is too long does not depend on how the bytes were split into reads: a line whose terminator
//! lies within `max` bytes is always found, one whose terminator does not is always refused once
//! `max + 1` bytes have arrived.

/// Where a line's terminator is, if anywhere yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// The terminator byte is at this offset of the buffer.
    Found(usize),
    /// Not among the bytes received so far; more bytes may bring it.
    Incomplete,
    /// Not within `max` bytes of the line's start: the line is too long whatever follows.
    TooLong,
}

/// Remembers how far the open line has been searched, so that a line arriving one byte per read
/// is scanned once in all rather than once per read.
#[derive(Debug, Default)]
pub(crate) struct LineScanner {
    /// Offset below which the open line holds no terminator.
    searched: usize,
    /// Bytes looked at since creation, for tests that check the work stays linear.
    #[cfg(test)]
    pub(crate) examined: usize,
}

impl LineScanner {
    /// Looks for `terminator` in the line starting at `start` of `buf`; `buf` must extend the
    /// buffer of the previous call while the same line is open.
    pub(crate) fn find(&mut self, buf: &[u8], start: usize, terminator: u8, max: usize) -> Line {
        let window_end = buf.len().min(start.saturating_add(max).saturating_add(1));
        let from = self.searched.max(start);
        let window = buf.get(from..window_end).unwrap_or_default();
        let found = memchr::memchr(terminator, window);
        #[cfg(test)]
        {
            self.examined += found.map_or(window.len(), |offset| offset + 1);
        }
        if let Some(offset) = found {
            self.searched = 0;
            return Line::Found(from + offset);
        }
        self.searched = window_end.max(start);
        if buf.len().saturating_sub(start) > max {
            Line::TooLong
        } else {
            Line::Incomplete
        }
    }

    /// The caller dropped the first `dropped` bytes of the buffer, all before the open line:
    /// where the search stopped moves back by as much.
    pub(crate) fn rebase(&mut self, dropped: usize) {
        // 0 (nothing searched) stays 0: the next search starts at the line's start.
        self.searched = self.searched.saturating_sub(dropped);
    }

    /// Forgets the open line, for when the next call brings a different buffer.
    pub(crate) fn reset(&mut self) {
        self.searched = 0;
    }
}

/// One search with nothing remembered, for parsers that keep no state between calls.
pub(crate) fn find_line(buf: &[u8], start: usize, terminator: u8, max: usize) -> Line {
    LineScanner::default().find(buf, start, terminator, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_within_window_and_refuses_beyond() {
        assert_eq!(find_line(b"ab\rc", 0, b'\r', 2), Line::Found(2));
        assert_eq!(find_line(b"ab", 0, b'\r', 2), Line::Incomplete);
        assert_eq!(find_line(b"abc", 0, b'\r', 2), Line::TooLong);
        // The terminator is past the window even though it has arrived.
        assert_eq!(find_line(b"abc\r", 0, b'\r', 2), Line::TooLong);
        assert_eq!(find_line(b"xxab\r", 2, b'\r', 2), Line::Found(4));
    }

    #[test]
    fn resumes_where_it_stopped() {
        let line = b"0123456789\r";
        let mut scanner = LineScanner::default();
        for end in 1..line.len() {
            assert_eq!(scanner.find(&line[..end], 0, b'\r', 100), Line::Incomplete);
        }
        assert_eq!(scanner.find(line, 0, b'\r', 100), Line::Found(10));
        assert_eq!(scanner.examined, line.len());
    }
}
