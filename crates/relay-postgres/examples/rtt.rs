fn main() {
    let url = std::env::args().nth(1).unwrap();
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let st = c.prepare("SELECT 1::BIGINT").unwrap();
    let t = std::time::Instant::now();
    for _ in 0..2000 { c.query(&st, &[]).unwrap(); }
    println!("sync postgres: {:?} per query", t.elapsed() / 2000);
    for threads in [false, true] {
        let rt = if threads { tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap() } else { tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap() };
        let (client, conn) = rt.block_on(tokio_postgres::connect(&url, tokio_postgres::NoTls)).unwrap();
        rt.spawn(async move { let _ = conn.await; });
        let st = rt.block_on(client.prepare("SELECT 1::BIGINT")).unwrap();
        let t = std::time::Instant::now();
        for _ in 0..2000 { rt.block_on(client.query(&st, &[])).unwrap(); }
        println!("tokio-postgres (multi_thread={threads}): {:?} per query", t.elapsed() / 2000);
    }
}
