//! Each protocol step run on both sides and compared: the replies (fences by their order), the
//! grants each client's subscription heard, the whole state, and the time left of every hold.
//! A grant heard moves its request to holding, unless its client is paused (it reads it when it
//! resumes) or the grant is lost ([`Step::LosePush`](crate::steps::Step::LosePush)).

use dlock_core::__private::conformance::parse_grant;
use dlock_model::{ClientId, LockRef, Op, Push, Reply, abstraction, apply};

use super::{Case, State};
use crate::redis_side::{Leases, token_of};
use crate::replies::{model_norm, real_norm, show, units};

impl Case<'_> {
    /// Runs `op` on both sides and compares everything.
    pub(super) fn exec(&mut self, op: Op) -> Result<Reply, String> {
        let real_op = self.real_op(&op)?;
        let reply = apply(&mut self.model, self.now, op.clone());
        let mut pushes = self.model.drain_published();
        let answer = self.real.run(&real_op)?;
        let heard = self.real.drain()?;
        self.ops += 1;
        self.log.push(format!(
            "{op:?}\n      model: {reply:?}\n      redis: {}",
            show(&answer)
        ));
        let (model_norm, model_fences) = model_norm(&op, &reply);
        let (real_norm, real_fences) = real_norm(&op, &answer)?;
        if model_norm != real_norm {
            return Err(format!(
                "the replies differ: model {model_norm:?}, redis {real_norm:?}"
            ));
        }
        self.pair_fences(&model_fences, &real_fences)?;
        // Each client's messages arrive in publish order; across clients the order is lost.
        pushes.sort_by_key(|p| p.client);
        self.compare_pushes(&pushes, &heard)?;
        for push in pushes.into_iter().filter(|p| p.grant.is_some()) {
            let client = usize::from(push.client);
            if std::mem::take(&mut self.lose_push[client]) {
                self.log
                    .push(format!("(the grant to {} is lost)", push.client));
            } else if self.paused[client] {
                self.unread.push(push);
            } else {
                self.hear(push);
            }
        }
        self.compare_state()?;
        Ok(reply)
    }

    /// The client of `push` reads its grant: the request it is for holds, if it still waits.
    pub(super) fn hear(&mut self, push: Push) {
        if let Some(grant) = push.grant
            && let Some(r) = self
                .requests
                .iter_mut()
                .find(|r| r.token == push.token && r.state == State::Queued)
        {
            r.state = State::Holding;
            r.fence = Some(grant.fence);
        }
    }

    /// `op` with the model's fences replaced by their Redis counterparts.
    fn real_op(&self, op: &Op) -> Result<Op, String> {
        let real = |fence: u64| {
            self.fences
                .iter()
                .find(|(m, _)| *m == fence)
                .map(|(_, r)| *r)
                .ok_or_else(|| format!("fence {fence} was never seen"))
        };
        Ok(match op.clone() {
            Op::ElectionPublish {
                name,
                token,
                fence,
                value,
            } => Op::ElectionPublish {
                name,
                token,
                fence: real(fence)?,
                value,
            },
            Op::ElectionResign { name, token, fence } => Op::ElectionResign {
                name,
                token,
                fence: real(fence)?,
            },
            Op::Guarded { lock, token, fence } => Op::Guarded {
                lock,
                token,
                fence: if fence == 0 { 0 } else { real(fence)? },
            },
            Op::FencedSet { key, fence, value } => Op::FencedSet {
                key,
                fence: real(fence)?,
                value,
            },
            other => other,
        })
    }

    /// Each new pair of fences must order like every pair seen before.
    fn pair_fences(&mut self, model: &[u64], real: &[u64]) -> Result<(), String> {
        if model.len() != real.len() {
            return Err(format!("fences: model issued {model:?}, redis {real:?}"));
        }
        for (&m, &r) in model.iter().zip(real) {
            if let Some((pm, pr)) = self.fences.iter().find(|(pm, pr)| m.cmp(pm) != r.cmp(pr)) {
                return Err(format!(
                    "fence order differs: model {m} vs earlier {pm} ({:?}), redis {r} vs \
                     earlier {pr} ({:?})",
                    m.cmp(pm),
                    r.cmp(pr)
                ));
            }
            self.fences.push((m, r));
        }
        Ok(())
    }

    fn compare_pushes(
        &mut self,
        model: &[Push],
        heard: &[(LockRef, ClientId, Vec<u8>)],
    ) -> Result<(), String> {
        let differ = || {
            let heard: Vec<String> = heard
                .iter()
                .map(|(l, c, p)| format!("{l:?} to {c}: {}", String::from_utf8_lossy(p)))
                .collect();
            format!("the messages differ: model published {model:?}, redis delivered {heard:?}")
        };
        if model.len() != heard.len() {
            return Err(differ());
        }
        for (push, (lock, client, payload)) in model.iter().zip(heard) {
            if push.lock != *lock || push.client != *client {
                return Err(differ());
            }
            // A nudge (set_limit dropped the request) is a grant of fence 0, never trusted.
            let grant = parse_grant(payload).filter(|(_, fence, _, _)| *fence > 0);
            match (push.grant, grant) {
                (Some(grant), Some((token, fence, _, lease))) => {
                    if token_of(&token) != Some(push.token) || units(lease) != units(grant.lease) {
                        return Err(differ());
                    }
                    self.pair_fences(&[grant.fence], &[fence])?;
                }
                (None, None) => {}
                _ => return Err(differ()),
            }
        }
        Ok(())
    }

    pub(super) fn compare_state(&mut self) -> Result<(), String> {
        let model = abstraction(&self.model, self.now);
        let (real, leases) = self.real.observe()?;
        if model != real {
            return Err(format!(
                "the states differ:\n    model: {model:?}\n    redis: {real:?}"
            ));
        }
        let model = Leases::of_model(&self.model, self.now);
        let real = leases;
        if model != real {
            return Err(format!(
                "the time left differs (whole lease units):\n    model: {model:?}\n    \
                 redis: {real:?}"
            ));
        }
        Ok(())
    }
}
