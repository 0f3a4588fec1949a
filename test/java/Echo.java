// A TCP echo server in Java (test/test_java.py): each line a client sends comes back as
// "echo LINE". Run unmodified under cmc; the JDK keeps, from its first close of a socket,
// one end of an AF_UNIX socket pair whose other end it closed (to dup2 over descriptors it
// closes): a copy of the world makes it a pair like it (kernel/proc/copyplan.py).
import java.io.*;
import java.net.*;

public class Echo {
    public static void main(String[] args) throws Exception {
        ServerSocket ss = new ServerSocket(Integer.parseInt(args[0]), 50, InetAddress.getByName("127.0.0.1"));
        while (true) {
            Socket s = ss.accept();
            BufferedReader in = new BufferedReader(new InputStreamReader(s.getInputStream()));
            PrintWriter out = new PrintWriter(s.getOutputStream(), true);
            String line;
            while ((line = in.readLine()) != null) out.println("echo " + line);
            s.close();
        }
    }
}
