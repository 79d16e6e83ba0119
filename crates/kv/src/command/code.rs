//! A command and its subcommand as one number ([`CommandCode`]), so that a connection's
//! last command can sit in an atomic its event loop writes and any loop reads: CLIENT
//! LIST's `cmd`, shown as of now like `idle`, without a string per command.

use std::borrow::Cow;

use super::subcommands;
use super::table::{Command, COMMANDS};

/// A command's place in [`COMMANDS`] (the upper 24 bits) and, for a container's
/// subcommand, its place in the container's table plus one (the lower 8; 0: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommandCode(u32);

impl CommandCode {
    /// No command yet (Redis shows `cmd=NULL`).
    pub const NONE: CommandCode = CommandCode(u32::MAX);

    /// `command` (an entry of [`COMMANDS`]), with its subcommand's place if it has one.
    pub fn of(command: &'static Command, subcommand: Option<usize>) -> CommandCode {
        let offset = (command as *const Command as usize).wrapping_sub(COMMANDS.as_ptr() as usize);
        let at = offset / std::mem::size_of::<Command>();
        assert!(
            COMMANDS.get(at).is_some_and(|c| std::ptr::eq(c, command)),
            "a command of the table"
        );
        let sub = subcommand.map_or(0, |place| place + 1);
        assert!(at < 1 << 24 && sub < 1 << 8, "the code holds the command");
        CommandCode(((at as u32) << 8) | sub as u32)
    }

    pub fn bits(self) -> u32 {
        self.0
    }

    pub fn from_bits(bits: u32) -> CommandCode {
        CommandCode(bits)
    }

    /// The name Redis 7 shows: `get`, `client|list`, or `NULL`.
    pub fn full_name(self) -> Cow<'static, str> {
        if self == CommandCode::NONE {
            return Cow::Borrowed("NULL");
        }
        let Some(command) = COMMANDS.get((self.0 >> 8) as usize) else {
            return Cow::Borrowed("NULL");
        };
        let sub = (self.0 & 0xff) as usize;
        match subcommands::of(command.name).and_then(|subs| subs.get(sub.checked_sub(1)?)) {
            Some(subcommand) => Cow::Owned(format!("{}|{}", command.name, subcommand.name)),
            None => Cow::Borrowed(command.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::lookup;

    #[test]
    fn a_code_names_its_command_and_subcommand() {
        let get = lookup(b"GET").expect("GET");
        assert_eq!(CommandCode::of(get, None).full_name(), "get");
        let client = lookup(b"client").expect("CLIENT");
        let list = subcommands::of("client")
            .and_then(|subs| subs.iter().position(|s| s.name == "list"))
            .expect("CLIENT LIST");
        let code = CommandCode::of(client, Some(list));
        assert_eq!(
            CommandCode::from_bits(code.bits()).full_name(),
            "client|list"
        );
        assert_eq!(CommandCode::NONE.full_name(), "NULL");
    }

    #[test]
    fn every_command_and_subcommand_fits_a_code() {
        for command in COMMANDS {
            let subs = subcommands::of(command.name).unwrap_or_default();
            assert!(
                subs.len() < 255,
                "{} has {} subcommands",
                command.name,
                subs.len()
            );
            for (place, sub) in subs.iter().enumerate() {
                let code = CommandCode::of(command, Some(place));
                assert_eq!(code.full_name(), format!("{}|{}", command.name, sub.name));
            }
            assert_eq!(CommandCode::of(command, None).full_name(), command.name);
        }
    }
}
