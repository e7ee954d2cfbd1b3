//! TLS and worker certificates against the real binaries: `serve --tls-cert --tls-key
//! --client-ca` speaks only TLS, the real worker connects over `https://` with its client
//! certificate and registers under the name the certificate carries, and a worker whose
//! certificate names someone else is refused even with a valid token.

mod common;

use common::with_token;
use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_client::AdminClient;
use kairos_tests::{spawn_until, Child, TempDir};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use std::time::{Duration, Instant};
use tonic::transport::{Certificate, Channel, ClientTlsConfig};

const OPS: &str = "ops-0123456789abcdefghijklmnop";
const FLEET: &str = "fleet-0123456789abcdefghijklm";

/// A CA, and certificates it signs, written as PEM files into `dir`.
struct Pki {
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    fn new(dir: &TempDir) -> Pki {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "kairos test CA");
        dir.write("ca.pem", &params.self_signed(&key).unwrap().pem());
        Pki {
            issuer: Issuer::new(params, key),
        }
    }

    /// `name.pem` and `name.key`, for common name `cn` and the given SANs.
    fn issue(&self, dir: &TempDir, name: &str, cn: &str, sans: &[&str]) {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        dir.write(&format!("{name}.pem"), &cert.pem());
        dir.write(&format!("{name}.key"), &key.serialize_pem());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_prove_their_name_with_a_certificate() {
    let dir = TempDir::new("tls");
    let pki = Pki::new(&dir);
    pki.issue(
        &dir,
        "server",
        "kairos-coordinator",
        &["127.0.0.1", "localhost"],
    );
    pki.issue(&dir, "w1", "w1", &[]);
    pki.issue(&dir, "other", "w2", &[]);
    // One fleet token for every worker name `w…`: only the certificate pins the name.
    dir.write(
        "tokens",
        &format!("ops admin:read,admin:write {OPS}\nw* worker {FLEET}\n"),
    );
    dir.write("fleet.token", FLEET);
    let p = |f: &str| dir.path().join(f).to_str().unwrap().to_string();
    let (_coordinator, found) = spawn_until(
        "kairos-coordinator",
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--public-listen",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
            "--tokens",
            &p("tokens"),
            "--tls-cert",
            &p("server.pem"),
            "--tls-key",
            &p("server.key"),
            "--client-ca",
            &p("ca.pem"),
        ],
        &dir.path().join("coordinator.log"),
        &[
            "kairos-coordinator admin on ",
            "kairos-coordinator listening on ",
            "kairos-coordinator metrics on ",
        ],
    );
    let admin_url = format!("https://{}", found[0]);
    let worker_url = format!("https://{}", found[1]);
    // What Kubernetes probes when the gRPC ports speak TLS (deploy/overlays/prod-tls).
    assert_eq!(kairos_tests::http_status(&found[2], "/readyz"), Some(200));
    assert_eq!(kairos_tests::http_status(&found[2], "/livez"), Some(200));

    // Plaintext is not answered.
    let mut plain = AdminClient::connect(admin_url.replace("https", "http"))
        .await
        .unwrap();
    assert!(plain
        .list_workers(with_token(pb::ListWorkersRequest::default(), OPS))
        .await
        .is_err());

    // The admin port verifies as the CA's server, without a client certificate.
    let ca = std::fs::read(p("ca.pem")).unwrap();
    let channel = Channel::from_shared(admin_url.clone())
        .unwrap()
        .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&ca)))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut admin = AdminClient::new(channel);

    let worker = |name: &str, cert: &str, log: &str| {
        let mut cmd = std::process::Command::new(kairos_tests::bin("kairos-worker"));
        cmd.args([
            "run",
            "--coordinator",
            &worker_url,
            "--name",
            name,
            "--token-file",
            &p("fleet.token"),
            "--tls-ca",
            &p("ca.pem"),
            "--tls-cert",
            &p(&format!("{cert}.pem")),
            "--tls-key",
            &p(&format!("{cert}.key")),
        ]);
        cmd.stdout(std::process::Stdio::null());
        cmd.stderr(std::fs::File::create(dir.path().join(log)).unwrap());
        Child(cmd.spawn().unwrap())
    };
    // w3 presents w2's certificate: its token admits `w3`, its certificate does not.
    let _impostor = worker("w3", "other", "impostor.log");
    let _w1 = worker("w1", "w1", "w1.log");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let workers = admin
            .list_workers(with_token(pb::ListWorkersRequest::default(), OPS))
            .await
            .unwrap()
            .into_inner()
            .workers;
        if workers.iter().any(|w| w.worker_name == "w1") {
            assert!(workers.iter().all(|w| w.worker_name != "w3"), "{workers:?}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "w1 did not register over mutual TLS: {workers:?}; see {}",
            dir.path().display()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The impostor was told why.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = std::fs::read_to_string(dir.path().join("impostor.log")).unwrap_or_default();
        if log.contains("client certificate names") {
            break;
        }
        assert!(Instant::now() < deadline, "impostor log: {log}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A worker without a client certificate does not get past the handshake.
    let mut cmd = std::process::Command::new(kairos_tests::bin("kairos-worker"));
    cmd.args([
        "run",
        "--coordinator",
        &worker_url,
        "--name",
        "w9",
        "--token-file",
        &p("fleet.token"),
        "--tls-ca",
        &p("ca.pem"),
    ]);
    cmd.stdout(std::process::Stdio::null());
    cmd.stderr(std::fs::File::create(dir.path().join("nocert.log")).unwrap());
    let _nocert = Child(cmd.spawn().unwrap());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let workers = admin
        .list_workers(with_token(pb::ListWorkersRequest::default(), OPS))
        .await
        .unwrap()
        .into_inner()
        .workers;
    assert!(workers.iter().all(|w| w.worker_name != "w9"), "{workers:?}");

    // A worker that does not trust the coordinator's certificate says why, not only
    // "transport error".
    let mut cmd = std::process::Command::new(kairos_tests::bin("kairos-worker"));
    cmd.args([
        "run",
        "--coordinator",
        &worker_url,
        "--name",
        "w7",
        "--token-file",
        &p("fleet.token"),
        "--tls-ca",
        &p("other.pem"),
        "--tls-cert",
        &p("w1.pem"),
        "--tls-key",
        &p("w1.key"),
    ]);
    cmd.stdout(std::process::Stdio::null());
    cmd.stderr(std::fs::File::create(dir.path().join("distrust.log")).unwrap());
    let _distrust = Child(cmd.spawn().unwrap());
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let log = std::fs::read_to_string(dir.path().join("distrust.log")).unwrap_or_default();
        if log.contains("coordinator session ended") {
            assert!(log.contains("certificate"), "the cause is logged: {log}");
            break;
        }
        assert!(Instant::now() < deadline, "distrust log: {log}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
