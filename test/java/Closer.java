// A socket closed while another thread reads it (test/test_java.py): the JDK closes it
// by dup2-ing a pre-closed socket over its descriptor, then signals the reader. The
// server takes a connection A and reads it on a thread of its own; then a connection B,
// and on B's line "close" it closes A, waits for the reader and tells B what the reader
// saw ("closed A; reader saw SocketException").
import java.io.*;
import java.net.*;

public class Closer {
    static volatile String seen = "nothing";

    public static void main(String[] args) throws Exception {
        ServerSocket ss = new ServerSocket(Integer.parseInt(args[0]), 50, InetAddress.getByName("127.0.0.1"));
        Socket a = ss.accept();
        Thread reader = new Thread(() -> {
            try {
                BufferedReader in = new BufferedReader(new InputStreamReader(a.getInputStream()));
                while (in.readLine() != null) {
                    // lines are read and dropped until the socket is closed under us
                }
                seen = "EOF";
            } catch (IOException e) {
                seen = e.getClass().getSimpleName();
            }
        });
        reader.start();
        Socket b = ss.accept();
        BufferedReader in = new BufferedReader(new InputStreamReader(b.getInputStream()));
        PrintWriter out = new PrintWriter(b.getOutputStream(), true);
        String line;
        while ((line = in.readLine()) != null) {
            if (line.equals("close")) {
                a.close();
                reader.join();
                out.println("closed A; reader saw " + seen);
            }
        }
    }
}
