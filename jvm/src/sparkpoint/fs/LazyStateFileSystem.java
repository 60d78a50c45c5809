package sparkpoint.fs;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.URI;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The local file system under the scheme {@code sparkpoint://} (docs/design.md §4, "Restores on N
 * executors"): every path is the same path on this machine's disk (below an optional root), and the
 * first time this process touches a state partition directory {@code .../state/<op>/<partition>}, or
 * anything in it, the pod's agent is asked to materialize that partition's restart set from the
 * restore point (POST /materialize) before the local operation goes on. RocksDB's provider copies its
 * SST files with {@code Path.getFileSystem} directly, so a file system is the one hook that sees
 * every read. Every local operation of RawLocalFileSystem maps its path through {@link #pathToFile},
 * which is where the partition is materialized.
 *
 * <p>Settings (Hadoop conf, then the environment): {@code fs.sparkpoint.root} / SPARKPOINT_FS_ROOT
 * (a local prefix, default none), {@code fs.sparkpoint.agent.port} / SPARKPOINT_AGENT_PORT or
 * {@code fs.sparkpoint.agent.portFile} / SPARKPOINT_AGENT_PORT_FILE (no agent: local only, as on the
 * driver), {@code fs.sparkpoint.agent.tokenFile} / SPARKPOINT_AGENT_TOKEN_FILE. In each,
 * {@code {executor}} stands for this JVM's Spark executor id ("driver" on the driver), so that
 * several executors on one machine (local-cluster) keep separate disks.
 */
public class LazyStateFileSystem extends RawLocalFileSystem {
  public static final String SCHEME = "sparkpoint";
  private static final Logger LOG = LoggerFactory.getLogger(LazyStateFileSystem.class);
  // Materialized partition directories of this process (local paths), and one lock each.
  private static final Set<String> DONE = ConcurrentHashMap.newKeySet();
  private static final ConcurrentHashMap<String, Object> LOCKS = new ConcurrentHashMap<>();

  private Configuration settings;
  private volatile boolean resolved;
  private String root = "";
  private String portSetting;
  private String portFile;
  private String tokenFile;
  private int timeoutMs;

  @Override
  public void initialize(URI uri, Configuration conf) throws IOException {
    super.initialize(uri, conf);
    settings = conf;
  }

  /**
   * The settings, with {executor} resolved at the first path this instance maps: an executor may
   * create the instance before its SparkEnv is set (seen on local-cluster), never before a task runs.
   */
  private void resolve() {
    if (resolved) {
      return;
    }
    synchronized (this) {
      if (resolved) {
        return;
      }
      String executor = executorId();
      root = trimSlash(setting(settings, "fs.sparkpoint.root", "SPARKPOINT_FS_ROOT", executor));
      portSetting = setting(settings, "fs.sparkpoint.agent.port", "SPARKPOINT_AGENT_PORT", executor);
      portFile = setting(settings, "fs.sparkpoint.agent.portFile", "SPARKPOINT_AGENT_PORT_FILE", executor);
      tokenFile = setting(settings, "fs.sparkpoint.agent.tokenFile", "SPARKPOINT_AGENT_TOKEN_FILE", executor);
      timeoutMs = settings.getInt("fs.sparkpoint.agent.timeoutSeconds", 900) * 1000;
      if (!root.isEmpty()) {
        new File(root).mkdirs();  // a mkdirs of a path climbs to "/", i.e. the root, and makes one level only
      }
      LOG.info("sparkpoint: executor {}: local root '{}', agent {}", executor, root,
          portSetting != null ? "port " + portSetting : portFile != null ? "port file " + portFile : "none");
      resolved = true;
    }
  }

  @Override
  public URI getUri() {
    return URI.create(SCHEME + ":///");
  }

  @Override
  public String getScheme() {
    return SCHEME;
  }

  @Override
  public File pathToFile(Path path) {
    resolve();
    File file = super.pathToFile(path);
    String local = root + file.getPath();
    String partition = hasAgent() ? partitionDir(local) : null;
    if (partition != null) {
      try {
        materialize(partition);
      } catch (IOException e) {
        // pathToFile cannot throw IOException: the local operation fails with this cause.
        throw new java.io.UncheckedIOException(e);
      }
    }
    return root.isEmpty() ? file : new File(local);
  }

  // Statuses carry the local file's path: give them back their path under this scheme.
  @Override
  public FileStatus getFileStatus(Path f) throws IOException {
    return unrooted(super.getFileStatus(f));
  }

  @Override
  public FileStatus getFileLinkStatus(Path f) throws IOException {
    return unrooted(super.getFileLinkStatus(f));
  }

  @Override
  public FileStatus[] listStatus(Path f) throws IOException {
    FileStatus[] found = super.listStatus(f);
    if (found != null && !root.isEmpty()) {
      for (FileStatus s : found) {
        unrooted(s);
      }
    }
    return found;
  }

  private FileStatus unrooted(FileStatus s) {
    resolve();
    if (s != null && !root.isEmpty()) {
      String p = s.getPath().toUri().getPath();
      if (p.startsWith(root + "/")) {
        s.setPath(new Path(SCHEME, null, p.substring(root.length())));
      }
    }
    return s;
  }

  /** The state partition directory {@code .../state/<op>/<partition>} a local path is (or is in), or null. */
  static String partitionDir(String path) {
    for (int at = path.lastIndexOf("/state/"); at >= 0; at = path.lastIndexOf("/state/", at - 1)) {
      String[] rest = path.substring(at + "/state/".length()).split("/", 3);
      if (rest.length >= 2 && isNumber(rest[0]) && isNumber(rest[1])) {
        return path.substring(0, at) + "/state/" + rest[0] + "/" + rest[1];
      }
      if (at == 0) {
        break;
      }
    }
    return null;
  }

  private static boolean isNumber(String s) {
    return !s.isEmpty() && s.chars().allMatch(Character::isDigit);
  }

  private boolean hasAgent() {
    return portSetting != null || portFile != null;
  }

  /** Once per partition directory per process; concurrent first touches wait for the one call. */
  private void materialize(String dir) throws IOException {
    if (DONE.contains(dir)) {
      return;
    }
    synchronized (LOCKS.computeIfAbsent(dir, k -> new Object())) {
      if (DONE.contains(dir)) {
        return;
      }
      long started = System.nanoTime();
      String answer = post("/materialize", "{\"dir\": " + quote(dir) + "}");
      DONE.add(dir);
      LOG.info("sparkpoint: materialized {} in {} ms: {}", dir, (System.nanoTime() - started) / 1_000_000, answer);
    }
  }

  private String post(String call, String body) throws IOException {
    String port = portSetting != null ? portSetting : read(portFile);
    URL url = new URL("http://127.0.0.1:" + port.trim() + call);
    HttpURLConnection c = (HttpURLConnection) url.openConnection();
    c.setConnectTimeout(10_000);
    c.setReadTimeout(timeoutMs);
    c.setRequestMethod("POST");
    c.setDoOutput(true);
    c.setRequestProperty("Content-Type", "application/json");
    if (tokenFile != null) {
      c.setRequestProperty("Authorization", "Bearer " + read(tokenFile).trim());
    }
    byte[] data = body.getBytes(StandardCharsets.UTF_8);
    c.setFixedLengthStreamingMode(data.length);
    try (OutputStream out = c.getOutputStream()) {
      out.write(data);
    }
    int status = c.getResponseCode();
    InputStream in = status < 400 ? c.getInputStream() : c.getErrorStream();
    String answer = in == null ? "" : new String(in.readAllBytes(), StandardCharsets.UTF_8);
    if (status != 200) {
      throw new IOException("sparkpoint agent " + url + " (" + body + "): HTTP " + status + " " + answer);
    }
    return answer;
  }

  private static String read(String file) throws IOException {
    return new String(Files.readAllBytes(Paths.get(file)), StandardCharsets.UTF_8);
  }

  private static String setting(Configuration conf, String key, String env, String executor) {
    String v = conf.get(key);
    if (v == null || v.isEmpty()) {
      v = System.getenv(env);
    }
    return v == null || v.isEmpty() ? null : v.replace("{executor}", executor);
  }

  private static String trimSlash(String s) {
    return s == null ? "" : s.replaceAll("/+$", "");
  }

  static String quote(String s) {
    StringBuilder b = new StringBuilder("\"");
    for (char ch : s.toCharArray()) {
      if (ch == '"' || ch == '\\') {
        b.append('\\').append(ch);
      } else if (ch < 0x20) {
        b.append(String.format("\\u%04x", (int) ch));
      } else {
        b.append(ch);
      }
    }
    return b.append('"').toString();
  }

  /**
   * This JVM's Spark executor id: the {@code --executor-id} of the executor backend's command line
   * (standalone and Kubernetes launch executors so; reading SparkEnv by reflection fails on an
   * executor's class path), else SPARK_EXECUTOR_ID, else "driver".
   */
  static String executorId() {
    String[] words = System.getProperty("sun.java.command", "").split(" ");
    for (int i = 0; i + 1 < words.length; i++) {
      if (words[i].equals("--executor-id")) {
        return words[i + 1];
      }
    }
    String fromEnv = System.getenv("SPARK_EXECUTOR_ID");
    return fromEnv != null && !fromEnv.isEmpty() ? fromEnv : "driver";
  }

}
