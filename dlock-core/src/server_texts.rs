//! The refusals a server reports without an error code, read from their text: one table, one
//! row per server flavour and meaning.
//!
//! dlock classifies a server's error by its code wherever the server sends one (`NOPERM`,
//! `NOSCRIPT`, `WRONGTYPE`, `MOVED` …: `error.rs`). Two refusals come as a bare `ERR` whose
//! text differs between servers: a command, key or channel refused by the user's ACL *inside a
//! script* (the script itself was allowed), and a cluster command sent to a standalone server.
//! Those, and only those, are matched here, by the fragment each tested server writes
//! (`tests/operate/server_texts.rs` provokes every row on its own flavour with a real server and
//! checks the fragment is what that server says). The version fields of `INFO` are never read
//! to choose a row: every row is tried on every text.
//!
//! A script refusal whose text no row knows still carries the script's marker
//! ([`SCRIPT_MARK`]); `error.rs` then says that an ACL or a service's allow-list may have
//! refused it, rather than calling it a plain server error without a word.

/// What a coded-less refusal means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "__conformance"), allow(unreachable_pub))]
pub enum Said {
    /// A command a script ran was refused by the user's ACL.
    ScriptCommand,
    /// A key a script touched was refused by the user's ACL.
    ScriptKey,
    /// A channel a script published to was refused by the user's ACL.
    ScriptChannel,
    /// A cluster command reached a server that is not a cluster node.
    ClusterDisabled,
}

/// One row: on which servers (as tested), what it means, and the fragment of their text.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(feature = "__conformance"), allow(unreachable_pub))]
pub struct Text {
    /// The servers that write this text, as `tests/operate/server_texts.rs` names the flavour
    /// it runs on ("Redis 7.0", "Valkey 8.1" …). Read by that test (through the `__conformance`
    /// feature) and this file's own; a build without the feature only matches fragments.
    #[cfg_attr(not(feature = "__conformance"), allow(dead_code))]
    pub servers: &'static [&'static str],
    /// What it means.
    pub said: Said,
    /// The fragment matched (case-insensitively) in the server's error text.
    pub fragment: &'static str,
}

/// Every tested server's text for every coded-less refusal dlock reads.
///
/// Redis 7.0 does not name the command it refused inside a script; Valkey 8.1 and 9.1 do
/// ("ACL failure in script: User u has no permissions to run the 'set' command"), and so do their
/// `NOPERM` texts, which `transport/conn/explain.rs` reads for the command's name.
#[cfg_attr(not(feature = "__conformance"), allow(unreachable_pub))]
pub const TEXTS: &[Text] = &[
    Text {
        servers: &["Redis 7.0"],
        said: Said::ScriptCommand,
        fragment: "the user executing the script can't run this command",
    },
    Text {
        servers: &["Redis 7.0"],
        said: Said::ScriptKey,
        fragment: "the user executing the script can't access at least one of the keys",
    },
    Text {
        servers: &["Redis 7.0"],
        said: Said::ScriptChannel,
        fragment: "the user executing the script can't publish to the channel",
    },
    Text {
        servers: &["Valkey 8.1", "Valkey 9.1"],
        said: Said::ScriptCommand,
        fragment: "acl failure in script: user",
    },
    Text {
        servers: &["Valkey 8.1", "Valkey 9.1"],
        said: Said::ScriptKey,
        fragment: "acl failure in script: no permissions to access a key",
    },
    Text {
        servers: &["Valkey 8.1", "Valkey 9.1"],
        said: Said::ScriptChannel,
        fragment: "acl failure in script: no permissions to access a channel",
    },
    Text {
        servers: &["Redis 7.0", "Valkey 8.1", "Valkey 9.1"],
        said: Said::ClusterDisabled,
        fragment: "this instance has cluster support disabled",
    },
];

/// What every server appends to an error raised by a command inside a script
/// ("… script: <sha>, on @user_script:12.").
pub(crate) const SCRIPT_MARK: &str = "@user_script";

/// What a server's error text means, when a row of [`TEXTS`] knows it.
#[cfg_attr(not(feature = "__conformance"), allow(unreachable_pub))]
pub fn read(text: &str) -> Option<Said> {
    let lower = text.to_lowercase();
    TEXTS
        .iter()
        .find(|row| lower.contains(row.fragment))
        .map(|row| row.said)
}

/// Whether `text` is an ACL refusal inside a script (of any flavour in the table).
pub(crate) fn denied_in_script(text: &str) -> bool {
    matches!(
        read(text),
        Some(Said::ScriptCommand | Said::ScriptKey | Said::ScriptChannel)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_servers_text_reads_as_its_row() {
        // The texts as the servers wrote them (tests/operate/server_texts.rs checks them live).
        for (text, said) in [
            (
                "ERR The user executing the script can't run this command or subcommand script: \
                 ee5bed0f, on @user_script:1.",
                Said::ScriptCommand,
            ),
            (
                "ERR The user executing the script can't access at least one of the keys \
                 mentioned in the command arguments script: 84a8c58e, on @user_script:1.",
                Said::ScriptKey,
            ),
            (
                "ERR The user executing the script can't publish to the channel mentioned in \
                 the command script: 32b731ac, on @user_script:1.",
                Said::ScriptChannel,
            ),
            (
                "ERR ACL failure in script: User u has no permissions to run the 'set' command \
                 script: ee5bed0f, on @user_script:1.",
                Said::ScriptCommand,
            ),
            (
                "ERR ACL failure in script: No permissions to access a key script: on \
                 @user_script:1.",
                Said::ScriptKey,
            ),
            (
                "ERR ACL failure in script: No permissions to access a channel script: on \
                 @user_script:1.",
                Said::ScriptChannel,
            ),
            (
                "ERR This instance has cluster support disabled",
                Said::ClusterDisabled,
            ),
        ] {
            assert_eq!(read(text), Some(said), "{text}");
        }
    }

    #[test]
    fn coded_refusals_and_other_errors_are_not_rows() {
        for text in [
            "NOPERM User u has no permissions to run the 'set' command",
            "NOPERM this user has no permissions to access one of the keys used as arguments",
            "ERR wrong number of arguments for 'set' command script: 1, on @user_script:1.",
            "OOM command not allowed when used memory > 'maxmemory'.",
        ] {
            assert_eq!(read(text), None, "{text}");
            assert!(!denied_in_script(text), "{text}");
        }
    }

    #[test]
    fn every_row_names_a_tested_server() {
        for row in TEXTS {
            assert!(!row.servers.is_empty(), "{row:?}");
            assert_eq!(row.fragment, row.fragment.to_lowercase(), "{row:?}");
        }
    }
}
