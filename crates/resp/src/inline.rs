//! Inline commands: one line of words, as typed into telnet or sent by old clients.
//!
//! Words are split with the rules of Redis's `sdssplitargs`: blanks separate words; `"..."`
//! takes `\n \r \t \b \a`, `\xHH` and `\<any>` escapes; `'...'` takes only `\'`; a closing quote
//! must be followed by a blank or the end of the line; a quote may start in the middle of a word
//! (`a"b c"` is the one word `ab c`) and ends it. Unlike Redis, whose C strings stop at a NUL
//! byte, a NUL here is an ordinary byte of a word.

/// The line has an unterminated quote, or a closing quote followed by a non-blank.
#[derive(Debug, PartialEq, Eq)]
pub struct UnbalancedQuotes;

/// Splits one inline command line (without its line ending) into words; the server also
/// splits a function library's `#!lua name=…` line with it, as Redis does.
pub fn split_words(line: &[u8]) -> Result<Vec<Vec<u8>>, UnbalancedQuotes> {
    let mut words = Vec::new();
    let mut cursor = Cursor { line, pos: 0 };
    loop {
        cursor.skip_blanks();
        if cursor.peek().is_none() {
            return Ok(words);
        }
        words.push(cursor.word()?);
    }
}

/// C's `isspace` in the "C" locale: what separates words.
fn is_blank(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// What ends an unquoted word; narrower than `is_blank`, as in Redis (a vertical tab or form
/// feed inside a word is kept).
fn ends_bare_word(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r')
}

/// A position in the line being split.
struct Cursor<'a> {
    line: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.line.get(self.pos).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<u8> {
        self.line.get(self.pos + ahead).copied()
    }

    fn skip_blanks(&mut self) {
        while self.peek().is_some_and(is_blank) {
            self.pos += 1;
        }
    }

    /// Reads one word starting at a non-blank byte.
    fn word(&mut self) -> Result<Vec<u8>, UnbalancedQuotes> {
        let mut word = Vec::new();
        while let Some(byte) = self.peek() {
            if ends_bare_word(byte) {
                break;
            }
            self.pos += 1;
            match byte {
                b'"' => return self.double_quoted(word),
                b'\'' => return self.single_quoted(word),
                other => word.push(other),
            }
        }
        Ok(word)
    }

    /// Reads the rest of a `"..."` section after its opening quote; it ends the word.
    fn double_quoted(&mut self, mut word: Vec<u8>) -> Result<Vec<u8>, UnbalancedQuotes> {
        loop {
            match (self.peek().ok_or(UnbalancedQuotes)?, self.peek_at(1)) {
                (b'\\', Some(b'x')) if self.hex_byte().is_some() => {
                    word.extend(self.hex_byte());
                    self.pos += 4;
                }
                (b'\\', Some(escaped)) => {
                    word.push(unescape(escaped));
                    self.pos += 2;
                }
                (b'"', _) => return self.close_quote(word),
                (other, _) => {
                    word.push(other);
                    self.pos += 1;
                }
            }
        }
    }

    /// Reads the rest of a `'...'` section after its opening quote; it ends the word.
    fn single_quoted(&mut self, mut word: Vec<u8>) -> Result<Vec<u8>, UnbalancedQuotes> {
        loop {
            match (self.peek().ok_or(UnbalancedQuotes)?, self.peek_at(1)) {
                (b'\\', Some(b'\'')) => {
                    word.push(b'\'');
                    self.pos += 2;
                }
                (b'\'', _) => return self.close_quote(word),
                (other, _) => {
                    word.push(other);
                    self.pos += 1;
                }
            }
        }
    }

    /// Steps over a closing quote, which must be followed by a blank or the end of the line.
    fn close_quote(&mut self, word: Vec<u8>) -> Result<Vec<u8>, UnbalancedQuotes> {
        self.pos += 1;
        match self.peek() {
            Some(next) if !is_blank(next) => Err(UnbalancedQuotes),
            _ => Ok(word),
        }
    }

    /// The byte of a `\xHH` escape at the cursor, when both digits are hexadecimal.
    fn hex_byte(&self) -> Option<u8> {
        let high = hex_value(self.peek_at(2)?)?;
        let low = hex_value(self.peek_at(3)?)?;
        Some(high * 16 + low)
    }
}

fn hex_value(byte: u8) -> Option<u8> {
    char::from(byte)
        .to_digit(16)
        .and_then(|digit| u8::try_from(digit).ok())
}

/// The byte a backslash escape inside double quotes stands for.
fn unescape(byte: u8) -> u8 {
    match byte {
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'b' => 0x08,
        b'a' => 0x07,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        split_words(line.as_bytes())
            .expect("balanced")
            .into_iter()
            .map(|word| String::from_utf8(word).expect("utf-8"))
            .collect()
    }

    #[test]
    fn splits_on_blanks() {
        assert_eq!(words("  SET  key\tvalue "), ["SET", "key", "value"]);
        assert_eq!(words(""), Vec::<String>::new());
        assert_eq!(words(" \t\x0b "), Vec::<String>::new());
        assert_eq!(words("a\x0bb"), ["a\x0bb"]);
    }

    #[test]
    fn double_quotes_take_escapes() {
        assert_eq!(
            words(r#"SET "a b" "\n\r\t\b\a\"\\\q""#),
            ["SET", "a b", "\n\r\t\x08\x07\"\\q"]
        );
        assert_eq!(words(r#""\x41\x7a\x4""#), ["Azx4"]);
        assert_eq!(words(r#""\xZZ""#), ["xZZ"]);
        assert_eq!(words(r#""""#), [""]);
        assert_eq!(split_words(br#""\xff\x00""#), Ok(vec![vec![0xff, 0x00]]));
    }

    #[test]
    fn single_quotes_take_only_quote_escape() {
        assert_eq!(words(r"'it\'s \n' x"), ["it's \\n", "x"]);
    }

    #[test]
    fn quote_inside_word_joins_and_ends_it() {
        assert_eq!(words(r#"a"b c" d"#), ["ab c", "d"]);
        assert_eq!(words(r#"a'b'"#), ["ab"]);
    }

    #[test]
    fn unbalanced_quotes_are_refused() {
        for line in [
            r#""abc"#, "'abc", r#""a"b"#, "'a'b", r#""a\"#, r"'a\'", r#""\"#,
        ] {
            assert_eq!(
                split_words(line.as_bytes()),
                Err(UnbalancedQuotes),
                "{line}"
            );
        }
    }
}
