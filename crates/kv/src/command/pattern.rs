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
    match_from(pattern, text, 0)
}

/// Bounds the recursion of `*` on adversarial patterns, as Redis does.
const MAX_DEPTH: usize = 1000;

fn match_from(mut p: &[u8], mut t: &[u8], depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    while let Some(&c) = p.first() {
        match c {
            b'*' => {
                while p.first() == Some(&b'*') {
                    p = &p[1..];
                }
                if p.is_empty() {
                    return true;
                }
                return (0..=t.len()).any(|skip| match_from(p, &t[skip..], depth + 1));
            }
            b'?' => {
                if t.is_empty() {
                    return false;
                }
                t = &t[1..];
                p = &p[1..];
            }
            b'[' => {
                let Some(&byte) = t.first() else {
                    return false;
                };
                let (matched, rest) = class(&p[1..], byte);
                if !matched {
                    return false;
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
                    return false;
                }
                p = rest;
                t = &t[1..];
            }
        }
    }
    t.is_empty()
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
    use super::matches;

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
