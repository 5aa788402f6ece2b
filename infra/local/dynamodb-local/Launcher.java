// Starts DynamoDB Local with its Jetty connector bound to 127.0.0.1 only.
//
// DynamoDB Local's own ServerRunner binds every interface. This launcher builds the same server
// through ServerRunner.createServerFromCommandLineArgs, sets the host on each Jetty
// ServerConnector before start, and then starts it.
//
// Run in source-file mode (no compile step):
//
//   java -Djava.library.path=<dir>/DynamoDBLocal_lib \
//     -cp '<dir>/DynamoDBLocal.jar:<dir>/DynamoDBLocal_lib/*' \
//     infra/local/dynamodb-local/Launcher.java -inMemory -sharedDb -disableTelemetry -port 0
//
// Arguments go straight to DynamoDB Local, except `-port 0`, which means "any free port" (DynamoDB
// Local itself only accepts 1-65535). Once the server is listening, this line goes to stdout:
//
//   lambdacable-dynamodb-local listening on 127.0.0.1:<port>
//
// The process exits when stdin reaches EOF (so it dies with its parent) or on SIGTERM/SIGINT. To
// run it with a closed or /dev/null stdin, add -Dlambdacable.watchStdin=false.

import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.List;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

public final class Launcher {
  private static final String HOST = System.getProperty("lambdacable.host", "127.0.0.1");
  private static final String READY_PREFIX = "lambdacable-dynamodb-local listening on ";
  /** Placeholder handed to DynamoDB Local's CLI parser when an ephemeral port is requested. */
  private static final String PLACEHOLDER_PORT = "8000";

  private Launcher() {}

  public static void main(String[] args) throws Exception {
    List<String> forwarded = new ArrayList<>();
    boolean ephemeral = false;
    for (int i = 0; i < args.length; i++) {
      String arg = args[i];
      if (arg.equals("-port") && i + 1 < args.length) {
        String value = args[++i];
        if (value.equals("0")) {
          ephemeral = true;
          value = PLACEHOLDER_PORT;
        }
        forwarded.add(arg);
        forwarded.add(value);
      } else {
        forwarded.add(arg);
      }
    }

    // DynamoDB Local prints its configuration banner on stdout; send it to stderr so stdout only
    // carries the ready line. (With -port 0 the banner shows the placeholder port.)
    PrintStream stdout = System.out;
    DynamoDBProxyServer proxy;
    try {
      System.setOut(System.err);
      proxy = ServerRunner.createServerFromCommandLineArgs(forwarded.toArray(new String[0]));
    } catch (Exception e) {
      fail("invalid arguments: " + e.getMessage(), e);
      return;
    } finally {
      System.setOut(stdout);
    }

    Server jetty = jettyServer(proxy);
    List<ServerConnector> connectors = new ArrayList<>();
    for (Connector connector : jetty.getConnectors()) {
      if (connector instanceof ServerConnector serverConnector) {
        serverConnector.setHost(HOST);
        if (ephemeral) {
          serverConnector.setPort(0);
        }
        connectors.add(serverConnector);
      }
    }
    if (connectors.isEmpty()) {
      fail("no Jetty ServerConnector found; cannot restrict the bind address", null);
      return;
    }

    Runtime.getRuntime().addShutdownHook(new Thread(() -> stopQuietly(proxy), "dynamodb-local-stop"));

    try {
      // safeStart() propagates bind failures; start() only prints them and carries on.
      proxy.safeStart();
    } catch (Exception e) {
      fail("could not start on " + HOST + ": " + e, e);
      return;
    }

    int port = connectors.get(0).getLocalPort();
    System.out.println(READY_PREFIX + HOST + ":" + port);
    System.out.flush();

    if (Boolean.parseBoolean(System.getProperty("lambdacable.watchStdin", "true"))) {
      drainUntilEof(System.in);
      System.exit(0); // runs the shutdown hook
    } else {
      proxy.join();
    }
  }

  private static Server jettyServer(DynamoDBProxyServer proxy) throws ReflectiveOperationException {
    for (Field field : DynamoDBProxyServer.class.getDeclaredFields()) {
      if (Server.class.isAssignableFrom(field.getType())) {
        field.setAccessible(true);
        return (Server) field.get(proxy);
      }
    }
    throw new NoSuchFieldException("DynamoDBProxyServer has no org.eclipse.jetty.server.Server field");
  }

  private static void drainUntilEof(InputStream in) {
    byte[] buffer = new byte[256];
    try {
      while (in.read(buffer) != -1) {
        // Input is ignored; only EOF matters.
      }
    } catch (IOException ignored) {
      // A broken pipe also means the parent is gone.
    }
  }

  private static void stopQuietly(DynamoDBProxyServer proxy) {
    try {
      proxy.stop();
    } catch (Exception ignored) {
      // Exiting anyway.
    }
  }

  private static void fail(String message, Throwable cause) {
    System.err.println("lambdacable-dynamodb-local: " + message);
    if (cause != null) {
      cause.printStackTrace(System.err);
    }
    System.exit(1);
  }
}
