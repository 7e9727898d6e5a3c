//! The heartbeat thread of a group member: every third of the session
//! timeout it tells the group the member is alive, on the shared
//! connection, whatever the consumer loop is doing (waiting on a slow
//! stdout, say). Each answer carries the current generation and
//! assignment; that, or the news that the group no longer knows the member,
//! is left for the consumer loop to pick up between pages.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use es_protocol::client::ClientError;

use crate::member::{is_lost, Assignment, Member};

/// What the last heartbeat learned, if the consumer loop must act on it.
#[derive(Debug)]
pub enum News {
    /// The current assignment (maybe a new generation).
    Assignment(Assignment),
    /// The group no longer knows this member: join again.
    Lost,
    /// A heartbeat failed otherwise; the thread has stopped.
    Failed(ClientError),
}

struct State {
    /// Whom to heartbeat for (changes when the loop joins again).
    member_id: String,
    news: Option<News>,
}

pub struct Heartbeats {
    state: Arc<Mutex<State>>,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Heartbeats {
    pub fn start(member: Member, member_id: String, every: Duration) -> std::io::Result<Heartbeats> {
        let state = Arc::new(Mutex::new(State {
            member_id,
            news: None,
        }));
        let (stop, stopped) = mpsc::channel::<()>();
        let shared = state.clone();
        let thread = std::thread::Builder::new()
            .name("es-heartbeat".into())
            .stack_size(256 << 10)
            .spawn(move || loop {
                match stopped.recv_timeout(every) {
                    Err(RecvTimeoutError::Timeout) => {}
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                }
                let id = lock(&shared).member_id.clone();
                let answer = member.heartbeat(&id);
                let mut s = lock(&shared);
                if s.member_id != id {
                    continue;
                }
                match answer {
                    Ok(a) => {
                        if !matches!(s.news, Some(News::Lost | News::Failed(_))) {
                            s.news = Some(News::Assignment(a));
                        }
                    }
                    Err(e) if is_lost(&e) => s.news = Some(News::Lost),
                    Err(e) => {
                        s.news = Some(News::Failed(e));
                        return;
                    }
                }
            })?;
        Ok(Heartbeats {
            state,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// What the heartbeats learned since the last call.
    pub fn take(&self) -> Option<News> {
        lock(&self.state).news.take()
    }

    /// Heartbeats go for `member_id` from now on (after joining again).
    pub fn set_member(&self, member_id: &str) {
        let mut s = lock(&self.state);
        s.member_id = member_id.to_string();
        s.news = None;
    }

    /// Stops the thread and waits for it.
    pub fn stop(&mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Heartbeats {
    fn drop(&mut self) {
        self.stop();
    }
}
