//! Building blocks of the differential tests' command generators: a command is its name
//! and a list of pieces, each a strategy giving zero or more words.

use proptest::prelude::*;
use proptest::sample::{select, subsequence};

/// A command's words, built from pieces that each give zero or more words.
pub type Words = BoxedStrategy<Vec<String>>;

pub fn lit(word: &'static str) -> Words {
    Just(vec![word.to_string()]).boxed()
}

pub fn one(pool: &'static [&'static str]) -> Words {
    select(pool).prop_map(|w| vec![w.to_string()]).boxed()
}

/// `count` (a range) repetitions of `piece`, flattened.
pub fn many(piece: Words, count: std::ops::RangeInclusive<usize>) -> Words {
    prop::collection::vec(piece, count)
        .prop_map(|parts| parts.concat())
        .boxed()
}

/// Several pieces as one piece (for repeating a group of words).
pub fn group(pieces: Vec<Words>) -> Words {
    pieces.prop_map(|parts| parts.concat()).boxed()
}

/// Either nothing or `piece`.
pub fn maybe(piece: Words) -> Words {
    prop_oneof![Just(Vec::new()), piece].boxed()
}

/// Some of `options` (each one or more words), in any order: syntax errors and conflicting
/// flags come from the same generator as valid combinations.
pub fn options(options: &'static [&'static str], most: usize) -> Words {
    subsequence(options, 0..=most)
        .prop_shuffle()
        .prop_map(|chosen| {
            chosen
                .into_iter()
                .flat_map(|o| o.split(' ').map(String::from))
                .collect()
        })
        .boxed()
}

/// A command: its name, then its pieces in order.
pub fn cmd(name: &'static str, pieces: Vec<Words>) -> Words {
    pieces
        .prop_map(move |parts| {
            let mut words = vec![name.to_string()];
            words.extend(parts.into_iter().flatten());
            words
        })
        .boxed()
}

/// A sequence of commands, one a line, for a failure's message.
pub fn show(sequence: &[Vec<String>]) -> String {
    let lines: Vec<String> = sequence
        .iter()
        .map(|args| {
            let words: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
            format!("  {}", words.join(" "))
        })
        .collect();
    lines.join("\n")
}
