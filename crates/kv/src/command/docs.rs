//! COMMAND DOCS (decision 168): each command's and subcommand's argument tree, the version
//! that introduced it, and a subcommand's summary, as Redis 7.0 reports them. redis-cli
//! builds `HELP command` and the hints it shows while a command is typed from these trees;
//! other tools read them to know a command's syntax. The trees are data, one line per
//! command in the files under `docs/`, written in a compact notation close to the syntax
//! lines of Redis's documentation, and parsed once, at the first COMMAND DOCS.
//!
//! # The notation
//!
//! A line is `NAME SINCE :: USAGE`, and for a subcommand `NAME SINCE :: USAGE :: SUMMARY`
//! (a command's summary is in the command table). `#` starts a comment line. USAGE is a
//! sequence of elements:
//!
//! * `name` or `name:type` — a placeholder (a word with a lowercase letter); the type is
//!   `key`, `string` (the default), `integer`, `double`, `pattern` or `unix-time`.
//!   `name:type@N` gives its key specification's index; otherwise the keys are numbered
//!   in order of appearance, continuing after the last explicit index.
//! * `"name"` — a string placeholder whose name is not a word (`"ip:port"`).
//! * `TOKEN` — a word without a lowercase letter, or any text in single quotes (`'$'`): a
//!   pure token, named its lowercase unless `#name` follows it.
//! * `[ … ]` an optional group, `( … )` a required one, `{ … }` a block.
//! * `a | b` inside `[ ]` or `( )`: the group is a choice ("oneof"), which needs `#name`.
//! * `...` after an element: it repeats. After a group that is one argument with a token,
//!   the token repeats with each value too ("multiple_token").
//! * `#name` after a group: the name of the argument it becomes.
//!
//! How a sequence becomes arguments:
//!
//! 1. A token directly followed by a placeholder or a required `( )` group is one
//!    argument: that element's, with the token (`[COUNT count:integer]`).
//! 2. A group (or a choice's alternative) that starts with a token followed by two or
//!    more elements is a block with that token, named `#name` or the token's lowercase
//!    (`[LIMIT offset:integer count:integer]`).
//! 3. A group that holds several arguments otherwise is a block without a token, and needs
//!    `#name` (`(key:key value)...#key_value`).
//! 4. A group that holds one argument is that argument, made optional, repeating or
//!    renamed by the group's marks.
//! 5. `{ … }` is a block whatever it holds: with its leading token, if it has one
//!    (`[{ID client-id:integer...}]`), else named by `#name`.
//!
//! Trees are compared with a `redis-server`'s in `tests/command_docs.rs`; every line
//! parses (`every_line_parses` below).

use std::collections::HashMap;
use std::sync::OnceLock;

/// The data files, by name (for error messages).
const FILES: [(&str, &str); 6] = [
    (
        "strings_and_keys.txt",
        include_str!("docs/strings_and_keys.txt"),
    ),
    (
        "lists_sets_hashes.txt",
        include_str!("docs/lists_sets_hashes.txt"),
    ),
    (
        "sorted_sets_geo_streams.txt",
        include_str!("docs/sorted_sets_geo_streams.txt"),
    ),
    (
        "connection_pubsub_scripting.txt",
        include_str!("docs/connection_pubsub_scripting.txt"),
    ),
    ("server.txt", include_str!("docs/server.txt")),
    (
        "server_introspection.txt",
        include_str!("docs/server_introspection.txt"),
    ),
];

/// What an argument is, as COMMAND DOCS names it in `type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Key,
    String,
    Integer,
    Double,
    Pattern,
    UnixTime,
    PureToken,
    OneOf,
    Block,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Key => "key",
            Kind::String => "string",
            Kind::Integer => "integer",
            Kind::Double => "double",
            Kind::Pattern => "pattern",
            Kind::UnixTime => "unix-time",
            Kind::PureToken => "pure-token",
            Kind::OneOf => "oneof",
            Kind::Block => "block",
        }
    }

    /// The kind a placeholder's `:type` names.
    fn of_placeholder(word: &str) -> Option<Kind> {
        [
            Kind::Key,
            Kind::String,
            Kind::Integer,
            Kind::Double,
            Kind::Pattern,
            Kind::UnixTime,
        ]
        .into_iter()
        .find(|kind| kind.name() == word)
    }
}

/// One argument of a command, and the arguments it holds (a choice's alternatives, a
/// block's parts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Argument {
    pub name: String,
    pub kind: Kind,
    /// Which of the command's key specifications finds this argument.
    pub key_spec_index: Option<u32>,
    pub token: Option<&'static str>,
    pub optional: bool,
    pub multiple: bool,
    /// The token is repeated before each value (`GET a GET b`).
    pub multiple_token: bool,
    pub arguments: Vec<Argument>,
}

impl Argument {
    fn new(name: impl Into<String>, kind: Kind) -> Argument {
        Argument {
            name: name.into(),
            kind,
            key_spec_index: None,
            token: None,
            optional: false,
            multiple: false,
            multiple_token: false,
            arguments: Vec::new(),
        }
    }

    fn block(name: impl Into<String>, token: Option<&'static str>, parts: Vec<Argument>) -> Self {
        Argument {
            token,
            arguments: parts,
            ..Argument::new(name, Kind::Block)
        }
    }

    /// COMMAND DOCS's flags for it, in Redis's order.
    pub fn flags(&self) -> Vec<&'static str> {
        [
            (self.optional, "optional"),
            (self.multiple, "multiple"),
            (self.multiple_token, "multiple_token"),
        ]
        .into_iter()
        .filter_map(|(set, flag)| set.then_some(flag))
        .collect()
    }
}

/// What COMMAND DOCS says of one command or subcommand beyond the command table.
#[derive(Debug)]
pub struct Doc {
    pub since: &'static str,
    /// A subcommand's summary (a command's is in the command table).
    pub summary: Option<&'static str>,
    pub arguments: Vec<Argument>,
}

/// A line of the data that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("command/docs/{file}:{line}: {reason}")]
pub struct DocsError {
    file: &'static str,
    line: usize,
    reason: String,
}

/// The documentation of `name` (`set`, `client|kill`), if the data has it.
pub fn of(name: &str) -> Option<&'static Doc> {
    static TABLE: OnceLock<HashMap<&'static str, Doc>> = OnceLock::new();
    // A line that does not parse is left out (the command is documented without
    // arguments); `every_line_parses` keeps the data free of them.
    TABLE
        .get_or_init(|| parse_files().filter_map(Result::ok).collect())
        .get(name)
}

/// Every line of the data, parsed.
fn parse_files() -> impl Iterator<Item = Result<(&'static str, Doc), DocsError>> {
    FILES.into_iter().flat_map(|(file, text)| {
        text.lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty() && !line.trim_start().starts_with('#'))
            .map(move |(at, line)| {
                parse_line(line).map_err(|reason| DocsError {
                    file,
                    line: at + 1,
                    reason,
                })
            })
    })
}

/// `NAME SINCE :: USAGE [:: SUMMARY]`.
fn parse_line(line: &'static str) -> Result<(&'static str, Doc), String> {
    let mut fields = line.split("::");
    let head = fields.next().unwrap_or_default();
    let usage = fields.next().ok_or("no '::' after the name and version")?;
    let summary = fields.next().map(str::trim);
    let mut words = head.split_whitespace();
    let (Some(name), Some(since), None) = (words.next(), words.next(), words.next()) else {
        return Err("want NAME SINCE before '::'".into());
    };
    if name.contains('|') != summary.is_some() {
        return Err(format!("{name}: a subcommand, and only one, has a summary"));
    }
    let arguments = parse_usage(usage).map_err(|reason| format!("{name}: {reason}"))?;
    Ok((
        name,
        Doc {
            since,
            summary,
            arguments,
        },
    ))
}

/// The arguments a usage describes.
pub fn parse_usage(usage: &'static str) -> Result<Vec<Argument>, String> {
    let words = lex(usage)?;
    let (mut alternatives, end) = parse_items(&words, 0, None)?;
    debug_assert_eq!(end, words.len());
    let sequence = alternatives.pop().unwrap_or_default();
    if !alternatives.is_empty() {
        return Err("'|' outside a group".into());
    }
    let mut arguments = resolve_sequence(&sequence)?;
    number_keys(&mut arguments, &mut 0);
    Ok(arguments)
}

/// The usage's words and marks: `[ ] ( ) { } | ...`, `#name`, `'token'`, words.
fn lex(usage: &'static str) -> Result<Vec<&'static str>, String> {
    const MARKS: &[&str] = &["...", "[", "]", "(", ")", "{", "}", "|"];
    let is_word = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '@' | '-');
    let mut words = Vec::new();
    let mut rest = usage.trim_start();
    while !rest.is_empty() {
        let len = if let Some(mark) = MARKS.iter().find(|mark| rest.starts_with(**mark)) {
            mark.len()
        } else if let Some(quote) = rest.chars().next().filter(|c| matches!(c, '\'' | '"')) {
            rest[1..].find(quote).ok_or("an unclosed quote")? + 2
        } else if let Some(label) = rest.strip_prefix('#') {
            1 + label.find(|c: char| !is_word(c)).unwrap_or(label.len())
        } else {
            rest.find(|c: char| !is_word(c)).unwrap_or(rest.len())
        };
        if len == 0 {
            return Err(format!("cannot read {rest:?}"));
        }
        words.push(&rest[..len]);
        rest = rest[len..].trim_start();
    }
    Ok(words)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bracket {
    Optional,
    Required,
    Block,
}

#[derive(Debug)]
enum Element {
    Placeholder {
        name: &'static str,
        kind: Kind,
        key_spec_index: Option<u32>,
    },
    Token(&'static str),
    Group {
        bracket: Bracket,
        alternatives: Vec<Vec<Item>>,
    },
}

#[derive(Debug)]
struct Item {
    element: Element,
    multiple: bool,
    label: Option<&'static str>,
}

impl Item {
    /// A token that stands alone, unmarked: it may give its token to what follows it.
    fn bare_token(&self) -> Option<&'static str> {
        match self.element {
            Element::Token(token) if !self.multiple && self.label.is_none() => Some(token),
            _ => None,
        }
    }

    /// Whether a token before it becomes its token (rule 1).
    fn takes_a_token(&self) -> bool {
        matches!(
            self.element,
            Element::Placeholder { .. }
                | Element::Group {
                    bracket: Bracket::Required,
                    ..
                }
        )
    }
}

/// The items from `words[at]` to the closing `close` (or the end), split at `|`: the
/// alternatives, and where parsing stopped (at the closing mark).
fn parse_items(
    words: &[&'static str],
    mut at: usize,
    close: Option<&str>,
) -> Result<(Vec<Vec<Item>>, usize), String> {
    let mut alternatives = Vec::new();
    let mut sequence: Vec<Item> = Vec::new();
    while let Some(&word) = words.get(at) {
        if Some(word) == close {
            break;
        }
        at += 1;
        let element = match word {
            "|" => {
                alternatives.push(std::mem::take(&mut sequence));
                continue;
            }
            "]" | ")" | "}" => return Err(format!("unmatched {word}")),
            "..." => {
                sequence.last_mut().ok_or("'...' after nothing")?.multiple = true;
                continue;
            }
            _ if word.starts_with('#') => {
                sequence.last_mut().ok_or("a #name after nothing")?.label = Some(&word[1..]);
                continue;
            }
            "[" | "(" | "{" => {
                let (bracket, closing) = match word {
                    "[" => (Bracket::Optional, "]"),
                    "(" => (Bracket::Required, ")"),
                    _ => (Bracket::Block, "}"),
                };
                let (inner, end) = parse_items(words, at, Some(closing))?;
                if words.get(end) != Some(&closing) {
                    return Err(format!("an unclosed {word}"));
                }
                if bracket == Bracket::Block && inner.len() > 1 {
                    return Err("'|' inside { }".into());
                }
                at = end + 1;
                Element::Group {
                    bracket,
                    alternatives: inner,
                }
            }
            _ if word.starts_with('\'') => Element::Token(&word[1..word.len() - 1]),
            _ if word.starts_with('"') => Element::Placeholder {
                name: &word[1..word.len() - 1],
                kind: Kind::String,
                key_spec_index: None,
            },
            _ if word.chars().any(|c| c.is_ascii_lowercase()) => placeholder(word)?,
            _ => Element::Token(word),
        };
        sequence.push(Item {
            element,
            multiple: false,
            label: None,
        });
    }
    alternatives.push(sequence);
    Ok((alternatives, at))
}

/// `name[:type][@index]`.
fn placeholder(word: &'static str) -> Result<Element, String> {
    let (word, key_spec_index) = match word.split_once('@') {
        Some((word, index)) => (word, Some(index.parse().map_err(|_| "a bad @index")?)),
        None => (word, None),
    };
    let (name, kind) = match word.split_once(':') {
        Some((name, kind)) => (
            name,
            Kind::of_placeholder(kind).ok_or(format!("unknown type {kind:?}"))?,
        ),
        None => (word, Kind::String),
    };
    Ok(Element::Placeholder {
        name,
        kind,
        key_spec_index,
    })
}

/// The arguments of a sequence of items (rule 1 pairs tokens with what follows them).
fn resolve_sequence(sequence: &[Item]) -> Result<Vec<Argument>, String> {
    let mut arguments = Vec::new();
    let mut at = 0;
    while let Some(item) = sequence.get(at) {
        let next = sequence.get(at + 1);
        match (item.bare_token(), next) {
            (Some(token), Some(next)) if next.takes_a_token() => {
                let mut argument = resolve(next)?;
                if argument.token.is_some() {
                    return Err(format!("{token} before an argument with a token"));
                }
                argument.token = Some(token);
                arguments.push(argument);
                at += 2;
            }
            _ => {
                arguments.push(resolve(item)?);
                at += 1;
            }
        }
    }
    Ok(arguments)
}

/// The argument one item is.
fn resolve(item: &Item) -> Result<Argument, String> {
    let mut argument = match &item.element {
        Element::Placeholder {
            name,
            kind,
            key_spec_index,
        } => {
            if item.label.is_some() {
                return Err(format!("a #name after the placeholder {name}"));
            }
            Argument {
                key_spec_index: *key_spec_index,
                ..Argument::new(*name, *kind)
            }
        }
        Element::Token(token) => Argument {
            token: Some(token),
            ..Argument::new(
                item.label
                    .map_or_else(|| token.to_lowercase(), String::from),
                Kind::PureToken,
            )
        },
        Element::Group {
            bracket,
            alternatives,
        } => return resolve_group(*bracket, alternatives, item),
    };
    argument.multiple = item.multiple;
    Ok(argument)
}

/// The argument a group is (rules 2–5), with the group's marks.
fn resolve_group(
    bracket: Bracket,
    alternatives: &[Vec<Item>],
    item: &Item,
) -> Result<Argument, String> {
    let mut argument = match (bracket, alternatives) {
        (Bracket::Block, [sequence]) => resolve_block(sequence, item.label)?,
        (_, [sequence]) => resolve_alternative(sequence, item.label)?,
        _ => Argument {
            arguments: alternatives
                .iter()
                .map(|sequence| resolve_alternative(sequence, None))
                .collect::<Result<_, _>>()?,
            ..Argument::new(item.label.ok_or("a choice without #name")?, Kind::OneOf)
        },
    };
    argument.optional |= bracket == Bracket::Optional;
    if item.multiple {
        argument.multiple = true;
        argument.multiple_token = argument.token.is_some();
    }
    Ok(argument)
}

/// `{ … }`: a block with its leading token, if it has one (rule 5).
fn resolve_block(sequence: &[Item], label: Option<&'static str>) -> Result<Argument, String> {
    match sequence.split_first() {
        Some((first, rest)) if first.bare_token().is_some() => {
            let token = first.bare_token();
            let name = label.map_or_else(|| token.unwrap_or_default().to_lowercase(), String::from);
            Ok(Argument::block(name, token, resolve_sequence(rest)?))
        }
        Some(_) => Ok(Argument::block(
            label.ok_or("a { } block without a token needs #name")?,
            None,
            resolve_sequence(sequence)?,
        )),
        None => Err("an empty { }".into()),
    }
}

/// One alternative of a group (or a group's only content): rules 2–4.
fn resolve_alternative(sequence: &[Item], label: Option<&'static str>) -> Result<Argument, String> {
    if sequence.len() >= 3 && sequence[0].bare_token().is_some() {
        return resolve_block(sequence, label);
    }
    let mut arguments = resolve_sequence(sequence)?;
    match arguments.len() {
        0 => Err("an empty group".into()),
        1 => {
            let mut argument = arguments.remove(0);
            if let Some(label) = label {
                argument.name = label.into();
            }
            Ok(argument)
        }
        _ => Ok(Argument::block(
            label.ok_or("a group of several arguments needs #name")?,
            None,
            arguments,
        )),
    }
}

/// Numbers the keys without an explicit index in order of appearance, after the last
/// explicit one.
fn number_keys(arguments: &mut [Argument], next: &mut u32) {
    for argument in arguments {
        match argument.key_spec_index {
            Some(index) => *next = (*next).max(index + 1),
            None if argument.kind == Kind::Key => {
                argument.key_spec_index = Some(*next);
                *next += 1;
            }
            None => {}
        }
        number_keys(&mut argument.arguments, next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(text: &'static str) -> Vec<Argument> {
        parse_usage(text).unwrap_or_else(|reason| panic!("{text}: {reason}"))
    }

    fn token(name: &str, token: &'static str) -> Argument {
        Argument {
            token: Some(token),
            ..Argument::new(name, Kind::PureToken)
        }
    }

    #[test]
    fn every_line_parses() {
        let errors: Vec<String> = parse_files()
            .filter_map(Result::err)
            .map(|err| err.to_string())
            .collect();
        assert!(errors.is_empty(), "{errors:#?}");
    }

    #[test]
    fn every_command_and_subcommand_has_one_line() {
        let mut names: Vec<&str> = parse_files()
            .filter_map(Result::ok)
            .map(|(name, _)| name)
            .collect();
        names.sort_unstable();
        let repeated: Vec<&&str> = names
            .windows(2)
            .filter(|w| w[0] == w[1])
            .map(|w| &w[0])
            .collect();
        assert!(repeated.is_empty(), "documented twice: {repeated:?}");
        let served: Vec<String> = crate::command::COMMANDS
            .iter()
            .flat_map(|command| {
                std::iter::once(command.name.to_string())
                    .chain(crate::command::subcommands::full_names(command.name))
            })
            .collect();
        let missing: Vec<&String> = served.iter().filter(|name| of(name).is_none()).collect();
        assert!(missing.is_empty(), "not documented: {missing:?}");
        assert_eq!(
            names.len(),
            served.len(),
            "a line for a command the server does not have"
        );
    }

    #[test]
    fn a_token_gives_itself_to_the_placeholder_after_it() {
        let count = Argument {
            token: Some("COUNT"),
            optional: true,
            ..Argument::new("count", Kind::Integer)
        };
        assert_eq!(usage("[COUNT count:integer]"), vec![count]);
        let key = Argument {
            key_spec_index: Some(0),
            multiple: true,
            ..Argument::new("key", Kind::Key)
        };
        assert_eq!(usage("key:key..."), vec![key]);
    }

    #[test]
    fn choices_blocks_and_repeated_tokens() {
        let set = usage("key:key value [NX | XX]#condition [LIMIT offset:integer count:integer]");
        assert_eq!(set[2].kind, Kind::OneOf);
        assert_eq!(set[2].arguments, vec![token("nx", "NX"), token("xx", "XX")]);
        assert!(set[2].optional);
        assert_eq!(
            (set[3].name.as_str(), set[3].kind, set[3].token),
            ("limit", Kind::Block, Some("LIMIT"))
        );
        assert_eq!(set[3].arguments.len(), 2);
        let get = &usage("[GET pattern:pattern]...")[0];
        assert!(get.optional && get.multiple && get.multiple_token);
        let once = &usage("TOKEN value...")[0];
        assert!(once.multiple && !once.multiple_token);
        let pairs = &usage("(key:key value)...#key_value")[0];
        assert_eq!(
            (pairs.kind, pairs.token, pairs.multiple),
            (Kind::Block, None, true)
        );
        let id = &usage("[{ID client-id:integer...}]")[0];
        assert_eq!(
            (id.name.as_str(), id.kind, id.optional),
            ("id", Kind::Block, true)
        );
        assert_eq!(id.arguments.len(), 1);
        let quoted = &usage("'$'#new_id")[0];
        assert_eq!(quoted, &token("new_id", "$"));
        let odd_name = &usage("[ADDR \"ip:port\"]")[0];
        assert_eq!(
            (odd_name.name.as_str(), odd_name.kind, odd_name.token),
            ("ip:port", Kind::String, Some("ADDR"))
        );
    }

    #[test]
    fn keys_are_numbered_after_explicit_indexes() {
        let sort = usage("key:key [BY pattern:pattern@1] [STORE destination:key]");
        let indexes: Vec<Option<u32>> = sort.iter().map(|a| a.key_spec_index).collect();
        assert_eq!(indexes, vec![Some(0), Some(1), Some(2)]);
    }

    proptest::proptest! {
        /// Any text made of the notation's marks and words parses or is refused, never
        /// panics (the data is ours, but a slip in it must be a test failure, not a crash).
        #[test]
        fn any_usage_parses_or_is_refused(text in "([ \\[\\](){}|#'\":@.a-zA-Z0-9_é-]{0,40})") {
            let text: &'static str = Box::leak(text.into_boxed_str());
            let _ = parse_usage(text);
        }
    }

    #[test]
    fn malformed_usages_are_refused() {
        for bad in [
            "[NX | XX]",
            "[a b]",
            "(a",
            "a)",
            "| a",
            "a:number",
            "...",
            "#x",
            "{a b}",
            "'$",
            "[]",
            "key#name",
            "a | b",
        ] {
            assert!(parse_usage(bad).is_err(), "{bad} parsed");
        }
    }
}
