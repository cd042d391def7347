//! What dlock's conformance test (`tests/conformance/scheduler/`) needs to run the scheduler's
//! Lua scripts by hand against a real server: each script's text exactly as the scheduler loads
//! it (`common.lua` prepended where the scheduler prepends it). Only with the non-default
//! `__conformance` feature, which only dlock's own test package turns on; not an API.

use crate::scripts::text;

/// Every script of the scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Script {
    /// `claim.lua`.
    Claim,
    /// `finish.lua`.
    Finish,
    /// `heartbeat.lua`.
    Heartbeat,
    /// `once.lua`.
    Once,
    /// `once_cancel.lua`.
    OnceCancel,
    /// `once_trim.lua`.
    OnceTrim,
    /// `register.lua`.
    Register,
    /// `renew_attempt.lua`.
    RenewAttempt,
    /// `request.lua`.
    Request,
    /// `resume.lua`.
    Resume,
    /// `schedule.lua`.
    Schedule,
    /// `take_request.lua`.
    TakeRequest,
    /// `take_retry.lua`.
    TakeRetry,
    /// `withdraw.lua`.
    Withdraw,
}

/// `common.lua`, which the scripts that read or write run records start with.
pub const COMMON: &str = text::COMMON;

impl Script {
    /// Every script.
    pub const ALL: [Script; 14] = [
        Script::Claim,
        Script::Finish,
        Script::Heartbeat,
        Script::Once,
        Script::OnceCancel,
        Script::OnceTrim,
        Script::Register,
        Script::RenewAttempt,
        Script::Request,
        Script::Resume,
        Script::Schedule,
        Script::TakeRequest,
        Script::TakeRetry,
        Script::Withdraw,
    ];

    /// Its file name.
    pub fn file(self) -> &'static str {
        match self {
            Script::Claim => "claim.lua",
            Script::Finish => "finish.lua",
            Script::Heartbeat => "heartbeat.lua",
            Script::Once => "once.lua",
            Script::OnceCancel => "once_cancel.lua",
            Script::OnceTrim => "once_trim.lua",
            Script::Register => "register.lua",
            Script::RenewAttempt => "renew_attempt.lua",
            Script::Request => "request.lua",
            Script::Resume => "resume.lua",
            Script::Schedule => "schedule.lua",
            Script::TakeRequest => "take_request.lua",
            Script::TakeRetry => "take_retry.lua",
            Script::Withdraw => "withdraw.lua",
        }
    }

    /// Its text as the scheduler loads it.
    pub fn text(self) -> &'static str {
        match self {
            Script::Claim => text::CLAIM,
            Script::Finish => text::FINISH,
            Script::Heartbeat => text::HEARTBEAT,
            Script::Once => text::ONCE,
            Script::OnceCancel => text::ONCE_CANCEL,
            Script::OnceTrim => text::ONCE_TRIM,
            Script::Register => text::REGISTER,
            Script::RenewAttempt => text::RENEW_ATTEMPT,
            Script::Request => text::REQUEST,
            Script::Resume => text::RESUME,
            Script::Schedule => text::SCHEDULE,
            Script::TakeRequest => text::TAKE_REQUEST,
            Script::TakeRetry => text::TAKE_RETRY,
            Script::Withdraw => text::WITHDRAW,
        }
    }
}
