//! Bytes past the log's end: the early pages of a batch that never
//! landed are never taken for a batch, nor for damage.

use super::*;

fn feed(early: &mut EarlyWrite, bytes: &[u8], step: usize) {
    let mut have = 0;
    while have < bytes.len() {
        have = (have + step).min(bytes.len());
        early.arrived(&bytes[..have]);
    }
}

/// Where the first batch ends the log in the early-write tests.
const FIRST_END: u64 = 1000;

fn segment_len(dir: &Path) -> u64 {
    std::fs::metadata(log_file(dir, 0)).map_or(0, |m| m.len())
}

#[test]
fn a_void_early_writes_pages_are_never_taken_for_a_batch() {
    // A client's batch has its pages written early; another batch is placed
    // first, ending exactly on a page boundary inside those pages; the
    // client's batch never comes. Its page there holds a valid batch whose
    // offsets follow the log's: a restart after a crash must not find it.
    for threads in DISK_THREAD_MODES {
        let dir = tempfile::tempdir().unwrap();
        let boundary = 2 * PAGE_BYTES;
        let model: Model = run_with_disk_threads(threads, async {
            let log = common::open_default(dir.path()).await;
            let mut model = Vec::new();
            ending_at(&log, &mut model, FIRST_END).await;
            let other = vec![rec(None, &"o".repeat((boundary - FIRST_END) as usize - 76), 2)];
            assert_eq!(batch::encoded_len(&other) as u64, boundary - FIRST_END);
            let mut client = vec![0x33u8; 600 << 10];
            let mut forged = Vec::new();
            batch::encode(
                Offset(2),
                &[rec(Some("x"), "forged", 3)],
                ProducerStamp::NONE,
                &mut forged,
            );
            let at = (boundary - FIRST_END) as usize;
            client[at..at + forged.len()].copy_from_slice(&forged);
            let mut early = log.begin_early(client.len()).expect("an early write");
            feed(&mut early, &client, 64 << 10);
            let last_page = (FIRST_END + client.len() as u64) / PAGE_BYTES * PAGE_BYTES;
            common::wait_for("the early pages to land", || {
                segment_len(dir.path()) >= last_page // blocking-ok: a test's look at the file
            })
            .await;
            log.append_durable(&other, ProducerStamp::NONE).await.unwrap();
            common::expect(&mut model, &other);
            drop(early);
            assert_eq!(contents(&log).await, model);
            model // dropped without a close: a crash
        });
        run(async {
            set_accept_data_loss(false);
            let (log, report) = open(dir.path()).await.unwrap();
            assert!(report.quarantined.is_empty(), "{report:?}");
            assert_eq!(contents(&log).await, model, "disk threads: {threads}");
            assert_eq!(log.next_offset(), Offset(2));
        });
    }
}

#[test]
fn no_early_write_begins_while_a_void_ones_pages_are_being_written() {
    // Their pages could overlap, and land in either order.
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = common::open_default(dir.path()).await;
        let mut model = Vec::new();
        ending_at(&log, &mut model, FIRST_END).await;
        let client = vec![0x44u8; 600 << 10];
        let mut early = log.begin_early(client.len()).expect("an early write");
        feed(&mut early, &client, 64 << 10);
        // Placed first: the early write is void, its writes still in flight.
        log.append_placed(&[rec(None, "first", 2)], ProducerStamp::NONE)
            .unwrap();
        assert!(
            log.begin_early(client.len()).is_none(),
            "a new early write while the void one's pages are still being written"
        );
        drop(early);
        common::wait_for("the void early write's pages to land", || {
            log.begin_early(client.len()).is_some()
        })
        .await;
    });
}

#[test]
fn cutting_a_void_early_writes_pages_keeps_every_batch_placed() {
    // A void early write's pages lie past the end; a later batch written
    // early over them lands where it went: the cut before its write must
    // not lose the pages it wrote early.
    for threads in DISK_THREAD_MODES {
        let dir = tempfile::tempdir().unwrap();
        let model: Model = run_with_disk_threads(threads, async {
            let log = common::open_default(dir.path()).await;
            let mut model = Vec::new();
            ending_at(&log, &mut model, FIRST_END).await;
            let (_, void) = common::produced(3, 200, 3000, 1);
            let mut early = log.begin_early(void.len()).expect("an early write");
            feed(&mut early, &void, 64 << 10);
            let small = vec![rec(None, "small", 2)];
            log.append_durable(&small, ProducerStamp::NONE).await.unwrap();
            common::expect(&mut model, &small);
            drop(early);
            let (records, bytes) = common::produced(5, 100, 3000, 1);
            let slot = std::cell::RefCell::new(None);
            common::wait_for("the void early write's pages to land", || {
                let mut slot = slot.borrow_mut();
                if slot.is_none() {
                    *slot = log.begin_early(bytes.len());
                }
                slot.is_some()
            })
            .await;
            let mut early = slot.into_inner().expect("begun");
            feed(&mut early, &bytes, 64 << 10);
            log.append_batch_durable(bytes, Some(early.ticket()))
                .await
                .unwrap();
            drop(early);
            common::expect(&mut model, &records);
            assert_eq!(contents(&log).await, model);
            model // a crash
        });
        run(async {
            let (log, _) = open(dir.path()).await.unwrap();
            assert_eq!(contents(&log).await, model, "disk threads: {threads}");
        });
    }
}
