//! The scheduler dashboard (`dlock_scheduler::web`, feature `web`) over plain HTTP, mounted
//! under `/jobs` of an axum app, with real scheduler replicas on a real Redis: the page lists
//! each job's cron, zone, next fire, paused state and replicas, and a run with its replica,
//! outcome and fencing token once it fired; same-origin POSTs pause, resume and run a job;
//! cross-origin POSTs, and POSTs with neither `Origin` nor `Sec-Fetch-Site`, get 403 and change
//! nothing; bad forms get 400; hostile names render as text; Redis down gets 503 with why. Standalone server only: the
//! dashboard reads through the scheduler's API, whose cluster behaviour has its own tests.
//! `dashboard_browser.rs` drives the same page in headless Chromium.

use std::time::Duration;

use dlock_core::Client;
use dlock_scheduler::{Job, RunOutcome, RunRecord, Scheduler};
use dlock_testkit::RedisServer;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use redis::AsyncCommands;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::support::{eventually, raw, redis};

/// A schedule that does not fire during a test.
pub(crate) const YEARLY: &str = "0 0 1 1 *";

/// Replicas running jobs on one Redis, the first one serving the dashboard at `{base}`
/// (`http://127.0.0.1:<port>/jobs`). Dropping it stops the replicas and the server.
pub(crate) struct Dashboard {
    pub(crate) base: String,
    /// A scheduler without jobs, to read what the dashboard did.
    pub(crate) admin: Scheduler,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Dashboard {
    /// Starts one replica per `(id, jobs)` and serves the first one's dashboard.
    pub(crate) async fn start(server: &RedisServer, replicas: Vec<(&str, Vec<Job>)>) -> Dashboard {
        Self::start_with_handlers(server, replicas, &[]).await
    }

    /// As [`Dashboard::start`], every replica but the first also registering `handlers` (each
    /// succeeds at once) for one-off jobs: the page is served by a scheduler without them, as
    /// in an admin application.
    pub(crate) async fn start_with_handlers(
        server: &RedisServer,
        replicas: Vec<(&str, Vec<Job>)>,
        handlers: &[&str],
    ) -> Dashboard {
        let (stop, stopped) = watch::channel(false);
        let mut tasks = Vec::new();
        let mut first = None;
        let mut names = Vec::new();
        for (id, jobs) in replicas {
            let mut builder = Scheduler::builder(Client::open(server.url().as_str()).unwrap())
                .replica_id(id)
                .heartbeat(Duration::from_millis(200));
            for handler in handlers.iter().filter(|_| first.is_some()) {
                builder = builder.handler(*handler, |_ctx| async { Ok::<(), String>(()) });
            }
            for job in jobs {
                names.push(job.name().to_owned());
                builder = builder.job(job);
            }
            let scheduler = builder.build().unwrap();
            first.get_or_insert_with(|| scheduler.clone());
            let mut stopped = stopped.clone();
            tasks.push(tokio::spawn(async move {
                let until = async move {
                    let _ = stopped.wait_for(|s| *s).await;
                };
                scheduler.run_until(until, Duration::from_secs(5)).await;
            }));
        }
        let app = axum::Router::new().nest(
            "/jobs",
            dlock_scheduler::web::router(first.expect("one replica")),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/jobs", listener.local_addr().unwrap());
        let mut stopped = stopped.clone();
        tasks.push(tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.wait_for(|s| *s).await;
                })
                .await
                .unwrap();
        }));
        let admin = Scheduler::builder(Client::open(server.url().as_str()).unwrap())
            .build()
            .unwrap();
        // Every job registered: the controls refuse jobs that are not known yet.
        for job in &names {
            crate::scheduler::scheduler_control::registered(&admin, job).await;
        }
        Dashboard {
            base,
            admin,
            stop,
            tasks,
        }
    }

    /// `host:port` of the server, as a browser sends it in `Host`.
    pub(crate) fn host(&self) -> &str {
        let rest = self.base.trim_start_matches("http://");
        rest.split('/').next().unwrap()
    }

    /// The ledger of `job` once it holds a run that `pick` accepts and that has ended.
    pub(crate) async fn ran(&self, job: &str, pick: impl Fn(&RunRecord) -> bool) -> RunRecord {
        eventually(
            Duration::from_secs(20),
            &format!("a run of {job}"),
            || async {
                let history = self.admin.history(job).await.unwrap();
                history
                    .into_iter()
                    .rev()
                    .find(|r| pick(r) && r.outcome != RunOutcome::Running)
            },
        )
        .await
    }

    /// Stops the replicas (their registry entries are withdrawn) and the server.
    pub(crate) async fn stop(mut self) {
        self.stop.send_replace(true);
        for task in self.tasks.drain(..) {
            task.await.unwrap();
        }
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}

/// A job that succeeds at once.
pub(crate) fn job(name: &str, cron: &str, tz: &str) -> Job {
    Job::new(name, cron, tz, |_ctx| async { Ok::<(), String>(()) }).unwrap()
}

type Http = HttpClient<HttpConnector, Full<Bytes>>;

fn http() -> Http {
    HttpClient::builder(TokioExecutor::new()).build_http()
}

/// An answer: status, `Location`, body.
#[derive(Debug)]
struct Answer {
    status: u16,
    location: Option<String>,
    body: String,
}

async fn send(http: &Http, request: hyper::Request<Full<Bytes>>) -> Answer {
    let response = http.request(request).await.unwrap();
    let status = response.status().as_u16();
    let location = response
        .headers()
        .get("location")
        .map(|v| v.to_str().unwrap().to_owned());
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        location,
        body: String::from_utf8(bytes.to_vec()).unwrap(),
    }
}

async fn get(http: &Http, url: &str) -> Answer {
    let request = hyper::Request::get(url).body(Full::default()).unwrap();
    send(http, request).await
}

/// A form POST of `job` and `action` with `headers` (and the `Host` the client sets).
async fn post(http: &Http, url: &str, form: &str, headers: &[(&str, &str)]) -> Answer {
    let mut request =
        hyper::Request::post(url).header("content-type", "application/x-www-form-urlencoded");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    send(
        http,
        request
            .body(Full::new(Bytes::from(form.to_owned())))
            .unwrap(),
    )
    .await
}

fn form(job: &str, action: &str) -> String {
    format!("job={}&action={action}", encode(job))
}

/// Percent-encodes everything but ASCII letters and digits.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_lists_jobs_with_their_replicas_and_runs() {
    let server = redis();
    let d = Dashboard::start(
        &server,
        vec![
            (
                "replica-a",
                vec![
                    job("tick", "* * * * * *", "Europe/Berlin"),
                    job("yearly", YEARLY, "UTC"),
                ],
            ),
            (
                "replica-b",
                vec![job("tick", "* * * * * *", "Europe/Berlin")],
            ),
        ],
    )
    .await;
    let run = d.ran("tick", |r| r.outcome == RunOutcome::Succeeded).await;
    let fence = run
        .fencing_token
        .expect("a run that took its lease has a fence");
    // Both replicas registered (each heartbeat republishes).
    eventually(
        Duration::from_secs(10),
        "two replicas registered",
        || async { (d.admin.registered_replicas().await.unwrap().len() == 2).then_some(()) },
    )
    .await;
    let http = http();
    let page = get(&http, &d.base).await;
    assert_eq!(page.status, 200, "{page:?}");
    let body = &page.body;
    for expected in [
        "<tr data-job=\"tick\">",
        "<code>* * * * * *</code><small>Europe/Berlin</small>",
        "<code>0 0 1 1 *</code><small>UTC</small>",
        "<span class=\"badge active\">active</span>",
        "<div class=\"replica\">replica-a<small>",
        "<div class=\"replica\">replica-b<small>",
        "Last runs of tick",
        "<td class=\"outcome succeeded\">succeeded",
        &format!("<td class=\"fence\">{fence}</td>"),
        &format!("<td class=\"replica\">{}<small>", run.replica),
        "<time datetime=\"",
        "<form method=\"post\" data-job=\"yearly\">",
    ] {
        assert!(body.contains(expected), "missing {expected:?} in\n{body}");
    }
    // The next fire of `yearly`: New Year, midnight UTC, in the job's zone as text.
    assert!(
        body.contains("-01-01 00:00:00 UTC</time>"),
        "next fire of yearly in\n{body}"
    );
    // Counts per replica from the ledger: whoever ran `tick` appears with a count.
    assert!(
        body.contains(&format!("<div class=\"count\">{}: <strong>", run.replica)),
        "{body}"
    );
    // Nobody ran `yearly`; only replica-a has it.
    let yearly = body.split("<tr data-job=\"yearly\">").nth(1).unwrap();
    let yearly = yearly.split("</tr>").next().unwrap();
    assert!(
        yearly.contains("no run yet") && !yearly.contains("replica-b"),
        "{yearly}"
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_origin_posts_pause_resume_and_run_a_job_now() {
    let server = redis();
    let d = Dashboard::start(
        &server,
        vec![("replica-a", vec![job("report", YEARLY, "UTC")])],
    )
    .await;
    let http = http();
    let host = d.host().to_owned();
    let origin = format!("http://{host}");

    // Origin == Host (a browser without Sec-Fetch-Site).
    let paused = post(
        &http,
        &d.base,
        &form("report", "pause"),
        &[("origin", &origin)],
    )
    .await;
    assert_eq!(paused.status, 303, "{paused:?}");
    assert_eq!(
        paused.location.as_deref(),
        Some("./jobs"),
        "back to the page"
    );
    assert!(d.admin.is_paused("report").await.unwrap());
    let page = get(&http, &d.base).await;
    assert!(
        page.body
            .contains("<span class=\"badge paused\">paused</span>"),
        "{page:?}"
    );
    assert!(
        page.body.contains("value=\"resume\">Resume</button>"),
        "{page:?}"
    );

    // Sec-Fetch-Site: same-origin.
    let same = [("sec-fetch-site", "same-origin")];
    let resumed = post(&http, &d.base, &form("report", "resume"), &same).await;
    assert_eq!(resumed.status, 303, "{resumed:?}");
    assert!(!d.admin.is_paused("report").await.unwrap());

    let asked = post(&http, &d.base, &form("report", "run-now"), &same).await;
    assert_eq!(asked.status, 303, "{asked:?}");
    let run = d.ran("report", |r| r.manual).await;
    assert_eq!(run.outcome, RunOutcome::Succeeded);
    assert_eq!(run.replica, "replica-a");
    let page = get(&http, &d.base).await;
    assert!(page.body.contains("<td>run now</td>"), "{page:?}");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_origin_posts_are_refused_and_change_nothing() {
    let server = redis();
    let d = Dashboard::start(
        &server,
        vec![("replica-a", vec![job("report", YEARLY, "UTC")])],
    )
    .await;
    let http = http();
    let mut con = raw(&server).await;
    let foreign: [&[(&str, &str)]; 5] = [
        &[("origin", "http://evil.example")],
        &[("sec-fetch-site", "cross-site")],
        &[
            ("sec-fetch-site", "same-site"),
            ("origin", "http://evil.example"),
        ],
        // A same-origin Origin does not outweigh the browser's own verdict.
        &[
            ("sec-fetch-site", "cross-site"),
            ("origin", "http://127.0.0.1"),
        ],
        // Neither header: not a form of the dashboard.
        &[],
    ];
    for headers in foreign {
        for action in ["pause", "run-now"] {
            let answer = post(&http, &d.base, &form("report", action), headers).await;
            assert_eq!(answer.status, 403, "{headers:?} {action}: {answer:?}");
            assert!(answer.body.starts_with("refused: "), "{answer:?}");
        }
    }
    assert!(!d.admin.is_paused("report").await.unwrap());
    let queued: bool = con.exists("dlock:{sched:report}:requests").await.unwrap();
    assert!(!queued, "no run-now request was queued");
    assert!(d.admin.history("report").await.unwrap().is_empty());

    // A paused job is not resumed by a cross-origin POST either.
    d.admin.pause("report").await.unwrap();
    let answer = post(
        &http,
        &d.base,
        &form("report", "resume"),
        &[("origin", "http://evil.example")],
    )
    .await;
    assert_eq!(answer.status, 403);
    assert!(d.admin.is_paused("report").await.unwrap());
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_forms_get_400_with_the_reason() {
    let server = redis();
    let d = Dashboard::start(
        &server,
        vec![("replica-a", vec![job("report", YEARLY, "UTC")])],
    )
    .await;
    let http = http();
    let same = [("sec-fetch-site", "same-origin")];
    let cases = [
        ("action=pause", "no `job` field"),
        ("job=report&action=delete", "unknown action `delete`:"),
        ("job=report", "no `action` field"),
        ("job=a%7Bb%7D&action=pause", "{"),
        ("job=&action=run-now", "empty"),
    ];
    for (body, reason) in cases {
        let answer = post(&http, &d.base, body, &same).await;
        assert_eq!(answer.status, 400, "{body}: {answer:?}");
        assert!(answer.body.contains(reason), "{body}: {answer:?}");
    }
    assert!(!d.admin.is_paused("report").await.unwrap());
    // A job that is not known (a typo): 404 naming the close name, and nothing is written.
    for action in ["pause", "resume", "run-now"] {
        let answer = post(&http, &d.base, &form("reprot", action), &same).await;
        assert_eq!(answer.status, 404, "{action}: {answer:?}");
        assert!(answer.body.contains("`reprot`"), "{answer:?}");
        assert!(answer.body.contains("did you mean report"), "{answer:?}");
    }
    assert!(!d.admin.is_known("reprot").await.unwrap());
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_names_and_errors_render_as_text() {
    let server = redis();
    let name = "<script>alert('job')</script>";
    let failing = Job::new(name, "* * * * * *", "UTC", |_ctx| async {
        Err::<(), _>("<img src=x onerror=alert(1)> & \"quoted\"")
    })
    .unwrap();
    let d = Dashboard::start(&server, vec![("<b>replica</b>", vec![failing])]).await;
    let run = d
        .ran(name, |r| matches!(r.outcome, RunOutcome::Failed(_)))
        .await;
    assert_eq!(run.replica, "<b>replica</b>");
    let http = http();
    let page = get(&http, &d.base).await;
    assert_eq!(page.status, 200);
    let body = &page.body;
    assert!(
        body.contains("&lt;script&gt;alert(&#39;job&#39;)&lt;/script&gt;"),
        "{body}"
    );
    assert!(body.contains("&lt;b&gt;replica&lt;/b&gt;"), "{body}");
    assert!(
        body.contains("&lt;img src=x onerror=alert(1)&gt; &amp; &quot;quoted&quot;"),
        "{body}"
    );
    for raw in ["<script>alert", "<b>replica", "<img"] {
        assert!(!body.contains(raw), "{raw:?} unescaped in\n{body}");
    }
    // The page has exactly one script element: its own.
    assert_eq!(body.matches("<script").count(), 1, "{body}");
    // The form carries the name back intact: a same-origin pause of it works.
    let same = [("sec-fetch-site", "same-origin")];
    let paused = post(&http, &d.base, &form(name, "pause"), &same).await;
    assert_eq!(paused.status, 303, "{paused:?}");
    assert!(d.admin.is_paused(name).await.unwrap());
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_answers_503_with_the_reason() {
    let mut server = redis();
    let d = Dashboard::start(
        &server,
        vec![("replica-a", vec![job("report", YEARLY, "UTC")])],
    )
    .await;
    let http = http();
    assert_eq!(get(&http, &d.base).await.status, 200);
    server.kill();
    let page = get(&http, &d.base).await;
    assert_eq!(page.status, 503, "{page:?}");
    assert!(page.body.contains("registry"), "says what failed: {page:?}");
    let same = [("sec-fetch-site", "same-origin")];
    let paused = post(&http, &d.base, &form("report", "pause"), &same).await;
    assert_eq!(paused.status, 503, "{paused:?}");
    assert!(paused.body.contains("pause `report`"), "{paused:?}");
    // The replica's shutdown would wait out its client's timeouts: dropping stops it.
    drop(d);
}
