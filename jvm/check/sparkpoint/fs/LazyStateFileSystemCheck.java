package sparkpoint.fs;

import com.sun.net.httpserver.HttpServer;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * The file system on its own, without Spark or JUnit (tests/runtime/test_state_fs_jvm.py runs it):
 * a fake agent on loopback counts the materialize calls. Exits 1 on the first failed check.
 * Arguments: a scratch directory.
 */
public final class LazyStateFileSystemCheck {
  private static void check(boolean ok, String what) {
    if (!ok) {
      System.err.println("FAILED: " + what);
      System.exit(1);
    }
    System.out.println("ok: " + what);
  }

  public static void main(String[] args) throws Exception {
    File base = new File(args[0]).getAbsoluteFile();
    Map<String, AtomicInteger> calls = new ConcurrentHashMap<>();
    AtomicBoolean failNext = new AtomicBoolean(false);
    HttpServer agent = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    agent.createContext("/materialize", ex -> {
      String body = new String(ex.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
      boolean authorized = "Bearer s3cret".equals(ex.getRequestHeaders().getFirst("Authorization"));
      String dir = body.replaceAll("^\\{\"dir\": \"(.*)\"\\}$", "$1");
      int status = 200;
      if (!authorized) {
        status = 401;
      } else if (failNext.getAndSet(false)) {
        status = 502;
      } else {
        calls.computeIfAbsent(dir, k -> new AtomicInteger()).incrementAndGet();
        try {
          Thread.sleep(200);  // a slow fetch: concurrent first touches must wait for it
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        new File(dir).mkdirs();
        Files.write(new File(dir, "1.changelog").toPath(), new byte[] {1, 2, 3});
      }
      byte[] out = ("{\"error\": \"status " + status + "\"}").getBytes(StandardCharsets.UTF_8);
      ex.sendResponseHeaders(status, out.length);
      ex.getResponseBody().write(out);
      ex.close();
    });
    agent.start();
    File token = new File(base, "token");
    Files.write(token.toPath(), "s3cret\n".getBytes(StandardCharsets.UTF_8));

    Configuration conf = new Configuration(false);
    conf.set("fs.sparkpoint.impl", LazyStateFileSystem.class.getName());
    conf.set("fs.sparkpoint.agent.port", String.valueOf(agent.getAddress().getPort()));
    conf.set("fs.sparkpoint.agent.tokenFile", token.getPath());
    conf.set("fs.sparkpoint.root", base + "/roots/{executor}");
    String ckpt = "sparkpoint:///ckpt";
    FileSystem fs = new Path(ckpt).getFileSystem(conf);
    check(fs instanceof LazyStateFileSystem, "the scheme resolves to the lazy file system");

    check(LazyStateFileSystem.partitionDir("/a/state/0/12/SSTs/x.sst").equals("/a/state/0/12"), "a file's partition");
    check(LazyStateFileSystem.partitionDir("/a/state/0/12").equals("/a/state/0/12"), "a partition directory");
    check(LazyStateFileSystem.partitionDir("/state/1/2/state/x/left/1.delta").equals("/state/1/2"), "a nested name");
    for (String none : List.of("/a/state/0", "/a/state/0/_metadata/metadata", "/a/offsets/3", "/a/state/x/1")) {
      check(LazyStateFileSystem.partitionDir(none) == null, "not a partition: " + none);
    }

    fs.mkdirs(new Path(ckpt + "/offsets"));
    fs.exists(new Path(ckpt + "/state/0/_metadata/metadata"));
    check(calls.isEmpty(), "the driver's share asks the agent nothing");
    check(new File(base, "roots/driver/ckpt/offsets").isDirectory(), "a path maps below the root of this JVM");

    ExecutorService pool = Executors.newFixedThreadPool(8);
    Path file = new Path(ckpt + "/state/0/3/1.changelog");
    List<Future<Boolean>> seen = new java.util.ArrayList<>();
    for (int i = 0; i < 8; i++) {
      seen.add(pool.submit(() -> fs.exists(file)));
    }
    for (Future<Boolean> f : seen) {
      check(f.get(), "a concurrent first touch sees the materialized file");
    }
    String local = base + "/roots/driver/ckpt/state/0/3";
    check(calls.get(local).get() == 1, "eight concurrent first touches make one call");
    fs.open(file).close();
    fs.listStatus(new Path(ckpt + "/state/0/3"));
    fs.create(new Path(ckpt + "/state/0/3/2.changelog")).close();
    check(calls.get(local).get() == 1, "once per partition per process");
    check(fs.getFileStatus(file).getPath().toString().equals("sparkpoint:/ckpt/state/0/3/1.changelog"),
        "a status names the path under the scheme, not the local root");
    check(fs.listStatus(new Path(ckpt + "/state/0"))[0].getPath().toString().equals("sparkpoint:/ckpt/state/0/3"),
        "a listing too");

    failNext.set(true);
    boolean failed = false;
    try {
      fs.exists(new Path(ckpt + "/state/0/4/1.changelog"));
    } catch (UncheckedIOException e) {
      failed = e.getCause().getMessage().contains("HTTP 502");
    }
    check(failed, "an agent's error fails the operation");
    check(fs.exists(new Path(ckpt + "/state/0/4/1.changelog")), "a failed partition is asked again");
    check(calls.get(base + "/roots/driver/ckpt/state/0/4").get() == 1, "and fetched by the retry");
    pool.shutdown();
    agent.stop(0);
    System.out.println("all checks passed");
  }
}
