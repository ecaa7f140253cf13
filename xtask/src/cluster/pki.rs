//! The cluster's PKI, made in-process: a CA, the API server's serving certificate, an admin client
//! certificate (group `system:masters`), the service-account signing key pair, the kubeconfig, and
//! the real node's kubelet certificates (client as `system:node:<name>`, serving for 127.0.0.1).

use std::{fs, path::Path};

use anyhow::Context as _;
use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

use super::layout::{Layout, ports};

/// DNS names and IPs the API server's certificate is valid for.
const APISERVER_SANS: [&str; 6] = [
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
    "127.0.0.1",
];

/// Writes `ca.{crt,key}`, `apiserver.{crt,key}`, `admin.{crt,key}`, `sa.{key,pub}` under the run
/// directory's `pki/`, and the admin kubeconfig.
pub fn write(layout: &Layout) -> anyhow::Result<()> {
    let dir = layout.pki();
    fs::create_dir_all(&dir)?;
    fs::create_dir_all(layout.real_node_dir())?;

    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "gpu-operator-e2e-ca");
    let ca_cert = ca_params.self_signed(&ca_key)?;
    write_pair(&dir, "ca", &ca_cert.pem(), &ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let mut serving = CertificateParams::new(Vec::<String>::new())?;
    serving
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    serving.subject_alt_names = APISERVER_SANS
        .iter()
        .map(|name| match name.parse() {
            Ok(ip) => Ok(SanType::IpAddress(ip)),
            Err(_) => Ok(SanType::DnsName((*name).try_into()?)),
        })
        .collect::<Result<_, rcgen::Error>>()?;
    serving
        .subject_alt_names
        .push(SanType::IpAddress([10, 96, 0, 1].into()));
    serving.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let serving_key = KeyPair::generate()?;
    let serving_cert = serving.signed_by(&serving_key, &issuer)?;
    write_pair(&dir, "apiserver", &serving_cert.pem(), &serving_key)?;

    let mut admin = CertificateParams::new(Vec::<String>::new())?;
    admin
        .distinguished_name
        .push(DnType::CommonName, "gpu-operator-e2e-admin");
    admin
        .distinguished_name
        .push(DnType::OrganizationName, "system:masters");
    admin.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let admin_key = KeyPair::generate()?;
    let admin_cert = admin.signed_by(&admin_key, &issuer)?;
    write_pair(&dir, "admin", &admin_cert.pem(), &admin_key)?;

    // The real node's kubelet: a client certificate the Node authorizer accepts, and a serving
    // certificate for 127.0.0.1 the API server verifies (logs, exec).
    let node = super::real_node::NODE_NAME;
    let (cert, key) = client_cert(&issuer, &format!("system:node:{node}"), "system:nodes")?;
    write_pair(&dir, "node", &cert, &key)?;
    let node_kubeconfig = kubeconfig(layout, &ca_cert.pem(), &cert, &key.serialize_pem());
    write_secret(&layout.real_node_dir().join("kubeconfig"), &node_kubeconfig)?;
    let mut kubelet = CertificateParams::new(Vec::<String>::new())?;
    kubelet
        .distinguished_name
        .push(DnType::CommonName, format!("{node}-kubelet"));
    kubelet.subject_alt_names = vec![
        SanType::IpAddress([127, 0, 0, 1].into()),
        SanType::IpAddress(super::real_node::Node::of(layout).gateway.parse()?),
        SanType::DnsName(node.try_into()?),
    ];
    kubelet.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let kubelet_key = KeyPair::generate()?;
    let kubelet_cert = kubelet.signed_by(&kubelet_key, &issuer)?;
    write_pair(&dir, "kubelet", &kubelet_cert.pem(), &kubelet_key)?;

    let sa_key = KeyPair::generate()?;
    write_secret(&dir.join("sa.key"), &sa_key.serialize_pem())?;
    fs::write(dir.join("sa.pub"), sa_key.public_key_pem())?;

    let kubeconfig = kubeconfig(
        layout,
        &ca_cert.pem(),
        &admin_cert.pem(),
        &admin_key.serialize_pem(),
    );
    write_secret(&layout.kubeconfig(), &kubeconfig)
}

/// A client certificate for user `cn` in group `org`: (PEM, key).
fn client_cert(
    issuer: &Issuer<'_, KeyPair>,
    cn: &str,
    org: &str,
) -> anyhow::Result<(String, KeyPair)> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, cn);
    params
        .distinguished_name
        .push(DnType::OrganizationName, org);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, issuer)?;
    Ok((cert.pem(), key))
}

fn write_pair(dir: &Path, name: &str, cert_pem: &str, key: &KeyPair) -> anyhow::Result<()> {
    fs::write(dir.join(format!("{name}.crt")), cert_pem)?;
    write_secret(&dir.join(format!("{name}.key")), &key.serialize_pem())
}

fn write_secret(path: &Path, contents: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(contents.as_bytes())?;
    Ok(())
}

/// An admin kubeconfig for `https://127.0.0.1:6443` with every credential embedded.
fn kubeconfig(layout: &Layout, ca_pem: &str, cert_pem: &str, key_pem: &str) -> String {
    let b64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: gpu-operator-e2e
  cluster:
    server: https://127.0.0.1:{port}
    certificate-authority-data: {ca}
users:
- name: admin
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
contexts:
- name: gpu-operator-e2e
  context:
    cluster: gpu-operator-e2e
    user: admin
current-context: gpu-operator-e2e
",
        port = layout.port(ports::APISERVER),
        ca = b64(ca_pem),
        cert = b64(cert_pem),
        key = b64(key_pem),
    )
}
