// jregister: a register replicated from a primary to a backup, in Java, the way a small
// JVM service ships: blocking java.net sockets, a thread per connection, println.
//
//     java -cp build/jregister Register backup  PORT
//     java -cp build/jregister Register primary PORT BACKUP_HOST:BACKUP_PORT
//
// Requests, one a line, each answered with one line, in order on its connection:
//
//     SET <value>  ->  OK <value>          (the primary) once the backup has the value
//     GET          ->  VALUE <value> | EMPTY   (either) the value it holds
//
// The primary connects to the backup at start and forwards each SET as "REPL <value>";
// the backup takes the value and answers "ACK <value>"; only then does the primary take
// it and answer OK. So a value a client was told is set is on both, and a read at the
// backup that begins after the OK sees it.
//
// The planted bug (BUG = true; demo/Makefile builds build/jregister-bug from this file
// with that one line changed): the primary answers OK as soon as it has sent REPL,
// before the backup's ACK. A read at the backup whose request arrives before the REPL
// does reads the old value after the write was acknowledged: no fault needed, only an
// order of deliveries.
import java.io.*;
import java.net.*;

public class Register {
    static final boolean BUG = false;

    static String value = null;               // the register; null: never set

    public static void main(String[] args) throws Exception {
        ServerSocket ss = new ServerSocket(Integer.parseInt(args[1]), 50,
                                           InetAddress.getByName("127.0.0.1"));
        if (args[0].equals("primary")) {
            primary(ss, args[2]);
        } else {
            while (true) {
                Socket s = ss.accept();
                new Thread(() -> serveBackup(s)).start();
            }
        }
    }

    static synchronized String apply(String line) {
        if (line.startsWith("REPL ")) {
            value = line.substring(5);
            return "ACK " + value;
        }
        if (line.equals("GET")) {
            return value == null ? "EMPTY" : "VALUE " + value;
        }
        return "ERR unknown request";
    }

    static void serveBackup(Socket s) {
        try (s) {
            BufferedReader in = new BufferedReader(new InputStreamReader(s.getInputStream()));
            PrintWriter out = new PrintWriter(s.getOutputStream(), true);
            String line;
            while ((line = in.readLine()) != null) {
                out.println(apply(line));
            }
        } catch (IOException e) {
            // the peer went away: its connection ends here
        }
    }

    static void primary(ServerSocket ss, String backup) throws Exception {
        int colon = backup.lastIndexOf(':');
        Socket b = new Socket(backup.substring(0, colon), Integer.parseInt(backup.substring(colon + 1)));
        BufferedReader fromBackup = new BufferedReader(new InputStreamReader(b.getInputStream()));
        PrintWriter toBackup = new PrintWriter(b.getOutputStream(), true);
        while (true) {
            try (Socket c = ss.accept()) {
                BufferedReader in = new BufferedReader(new InputStreamReader(c.getInputStream()));
                PrintWriter out = new PrintWriter(c.getOutputStream(), true);
                String line;
                while ((line = in.readLine()) != null) {
                    if (!line.startsWith("SET ")) {
                        out.println(line.equals("GET") ? apply(line) : "ERR unknown request");
                        continue;
                    }
                    String v = line.substring(4);
                    toBackup.println("REPL " + v);
                    if (BUG) {
                        out.println("OK " + v);
                    }
                    String ack = fromBackup.readLine();
                    if (ack == null || !ack.equals("ACK " + v)) {
                        throw new IOException("the backup did not acknowledge " + v + ": " + ack);
                    }
                    synchronized (Register.class) {
                        value = v;
                    }
                    if (!BUG) {
                        out.println("OK " + v);
                    }
                }
            }
        }
    }
}
