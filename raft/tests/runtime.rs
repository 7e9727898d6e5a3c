//! `GlommioRuntime`, openraft's runtime on glommio: what openraft relies on.

mod common;

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use common::run;
use es_raft::openraft::async_runtime::AsyncOneshotSendExt;
use es_raft::openraft::{AsyncRuntime, TokioInstant};
use es_raft::GlommioRuntime as Rt;

#[test]
fn a_dropped_join_handle_leaves_the_task_running() {
    run(async {
        let done = Rc::new(Cell::new(false));
        let d = done.clone();
        drop(Rt::spawn(async move {
            Rt::sleep(Duration::from_millis(20)).await;
            d.set(true);
        }));
        glommio::timer::sleep(Duration::from_millis(200)).await;
        assert!(
            done.get(),
            "openraft expects a dropped handle to detach, not cancel"
        );
        assert_eq!(Rt::spawn(async { 7 }).await, Ok(7));
    });
}

#[test]
fn timeouts_fire_and_let_a_quick_future_through() {
    run(async {
        let slow = Rt::timeout(Duration::from_millis(10), Rt::sleep(Duration::from_secs(30)));
        assert!(slow.await.is_err());
        let quick = Rt::timeout(Duration::from_secs(30), async { 5 });
        assert_eq!(quick.await, Ok(5));
        let at = TokioInstant::now() + Duration::from_millis(10);
        assert!(Rt::timeout_at(at, Rt::sleep(Duration::from_secs(30)))
            .await
            .is_err());
    });
}

#[test]
fn sleep_until_waits_for_the_deadline() {
    run(async {
        let at = TokioInstant::now() + Duration::from_millis(30);
        Rt::sleep_until(at).await;
        assert!(TokioInstant::now() >= at);
        // A deadline in the past returns at once.
        Rt::sleep_until(TokioInstant::now() - Duration::from_secs(1)).await;
        assert!(at.elapsed() < Duration::from_secs(3600));
    });
}

#[test]
fn a_dropped_oneshot_sender_wakes_the_receiver_with_an_error() {
    run(async {
        let (tx, rx) = Rt::oneshot::<u32>();
        drop(tx);
        assert!(rx.await.is_err());
        let (tx, rx) = Rt::oneshot::<u32>();
        Rt::spawn(async move {
            tx.send(3).unwrap();
        });
        assert_eq!(rx.await, Ok(3));
        let (tx, rx) = Rt::oneshot::<u32>();
        drop(rx);
        assert_eq!(tx.send(1), Err(1));
    });
}

#[test]
fn tasks_go_into_the_raft_task_queue_when_one_is_set() {
    run(async {
        let tq = glommio::executor().create_task_queue(
            glommio::Shares::Static(1000),
            glommio::Latency::Matters(Duration::from_millis(1)),
            "raft",
        );
        es_raft::set_raft_task_queue(Some(tq));
        let seen = Rt::spawn(async { glommio::executor().current_task_queue() }).await;
        es_raft::set_raft_task_queue(None);
        assert_eq!(seen, Ok(tq));
    });
}
