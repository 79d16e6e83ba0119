//! Redis's glob patterns (KEYS, SCAN MATCH, HSCAN MATCH): `*`, `?`, `[abc]`, `[^a-z]`, and
//! `\` to quote the next byte.

/// Whether `text` matches `pattern`.
///
/// Redis's matcher (`stringmatchlen`) compares while both the pattern and the text last, so
/// an empty text matches the empty pattern only: `**` or `*?*` never match the empty key.
/// KEYS, SCAN and the collection scans short-cut the pattern `*` to "everything" before
/// matching, so `*` alone does match it. Both quirks are kept, so that the same keys come
/// back.
pub fn matches(pattern: &[u8], text: &[u8]) -> bool {
    if text.is_empty() {
        return pattern.is_empty() || pattern == b"*";
    }
    match_from(pattern, text, 0) == Found::Match
}

/// Bounds the recursion of `*` on adversarial patterns, as Redis does.
const MAX_DEPTH: usize = 1000;

/// How a match of a pattern's rest against a text's rest ended.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Found {
    Match,
    NoMatch,
    /// The pattern after a `*` matched starting nowhere in what was left of the text: an
    /// earlier `*` that took a longer stretch would leave it less text, so the whole match
    /// fails at once. Without this cut, a pattern like `*a*a*a…b` takes time exponential in
    /// its stars (Redis's `skipLongerMatches`, CVE-2022-36021).
    Nowhere,
}

fn match_from(mut p: &[u8], mut t: &[u8], depth: usize) -> Found {
    if depth > MAX_DEPTH {
        return Found::NoMatch;
    }
    while let Some(&c) = p.first() {
        match c {
            b'*' => {
                while p.first() == Some(&b'*') {
                    p = &p[1..];
                }
                if p.is_empty() {
                    return Found::Match;
                }
                // What follows the stars needs a byte: the empty rest of the text is not tried.
                for skip in 0..t.len() {
                    match match_from(p, &t[skip..], depth + 1) {
                        Found::NoMatch => {}
                        found => return found,
                    }
                }
                return Found::Nowhere;
            }
            b'?' => {
                if t.is_empty() {
                    return Found::NoMatch;
                }
                t = &t[1..];
                p = &p[1..];
            }
            b'[' => {
                let Some(&byte) = t.first() else {
                    return Found::NoMatch;
                };
                let (matched, rest) = class(&p[1..], byte);
                if !matched {
                    return Found::NoMatch;
                }
                p = rest;
                t = &t[1..];
            }
            _ => {
                let (literal, rest) = if c == b'\\' && p.len() >= 2 {
                    (p[1], &p[2..])
                } else {
                    (c, &p[1..])
                };
                if t.first() != Some(&literal) {
                    return Found::NoMatch;
                }
                p = rest;
                t = &t[1..];
            }
        }
    }
    if t.is_empty() {
        Found::Match
    } else {
        Found::NoMatch
    }
}

/// Matches `byte` against the class that starts at `p` (after `[`); returns the verdict and
/// the pattern after the closing `]` (or its end, when unclosed, as Redis does).
fn class(mut p: &[u8], byte: u8) -> (bool, &[u8]) {
    let negate = p.first() == Some(&b'^');
    if negate {
        p = &p[1..];
    }
    let mut matched = false;
    while let Some(&c) = p.first() {
        if c == b']' {
            p = &p[1..];
            return (matched != negate, p);
        }
        if c == b'\\' && p.len() >= 2 {
            matched |= p[1] == byte;
            p = &p[2..];
        } else if p.len() >= 3 && p[1] == b'-' {
            // Any third byte ends the range, `]` too, as in Redis: `[a-]` is the range from
            // `]` to `a` (and the class is left unclosed), not `a` or `-`.
            let (lo, hi) = if c <= p[2] { (c, p[2]) } else { (p[2], c) };
            matched |= (lo..=hi).contains(&byte);
            p = &p[3..];
        } else {
            matched |= c == byte;
            p = &p[1..];
        }
    }
    (matched != negate, p)
}

#[cfg(test)]
mod tests {
    use super::{class, matches};
    use proptest::prelude::*;
    use std::time::Duration;

    /// The matcher without the cut: every stretch of every `*` tried.
    fn exhaustive(p: &[u8], t: &[u8]) -> bool {
        match p.first() {
            None => t.is_empty(),
            Some(b'*') => (0..=t.len()).any(|skip| exhaustive(&p[1..], &t[skip..])),
            Some(b'?') => !t.is_empty() && exhaustive(&p[1..], &t[1..]),
            Some(b'[') => match t.first() {
                Some(&byte) => {
                    let (matched, rest) = class(&p[1..], byte);
                    matched && exhaustive(rest, &t[1..])
                }
                None => false,
            },
            Some(&c) => {
                let (literal, rest) = if c == b'\\' && p.len() >= 2 {
                    (p[1], &p[2..])
                } else {
                    (c, &p[1..])
                };
                t.first() == Some(&literal) && exhaustive(rest, &t[1..])
            }
        }
    }

    proptest! {
        #[test]
        fn the_cut_changes_no_verdict(
            pattern in proptest::collection::vec(proptest::sample::select(b"ab*?[]^-\\".to_vec()), 0..12),
            text in proptest::collection::vec(proptest::sample::select(b"ab-]".to_vec()), 1..12),
        ) {
            prop_assert_eq!(matches(&pattern, &text), exhaustive(&pattern, &text));
        }
    }

    #[test]
    fn many_stars_against_a_long_key_take_no_time() {
        // KEYS with this pattern held an event loop for good before the cut; the match runs
        // on a thread of its own so that a regression fails here rather than hangs.
        let pattern = "*a".repeat(129);
        let key = "a".repeat(43) + "b";
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(matches(pattern.as_bytes(), key.as_bytes()));
        });
        let verdict = rx.recv_timeout(Duration::from_secs(5));
        assert_eq!(verdict, Ok(false), "no verdict within 5 s");
    }

    #[test]
    fn globs_match_as_in_redis() {
        let yes: &[(&str, &str)] = &[
            ("*", "anything"),
            ("h?llo", "hello"),
            ("h*llo", "heeeello"),
            ("h[ae]llo", "hallo"),
            ("h[^e]llo", "hallo"),
            ("h[a-b]llo", "hbllo"),
            ("key:*:name", "key:12:name"),
            ("\\*", "*"),
            ("", ""),
            ("*", ""),
            ("[a-]", "]"),
            ("[a-]", "^"),
        ];
        let no: &[(&str, &str)] = &[
            ("h?llo", "hllo"),
            ("h[ae]llo", "hillo"),
            ("h[^e]llo", "hello"),
            ("h[a-b]llo", "hcllo"),
            ("\\*", "a"),
            ("abc", "abcd"),
            ("", "a"),
            ("**", ""),
            ("?", ""),
            ("[a-]", "-"),
        ];
        for (pattern, text) in yes {
            assert!(
                matches(pattern.as_bytes(), text.as_bytes()),
                "{pattern} ~ {text}"
            );
        }
        for (pattern, text) in no {
            assert!(
                !matches(pattern.as_bytes(), text.as_bytes()),
                "{pattern} !~ {text}"
            );
        }
    }
}
